#include "report_wsi.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "report_deepzoom.h"
#include "report_page.h"

namespace tessera::apps::report {
namespace {

namespace fs = std::filesystem;

constexpr int kOverlaySide = 2048;  // longest side of the overlay pictures, in pixels

std::string png_data_url(const cv::Mat& bgra) {
  std::vector<uint8_t> png;
  cv::imencode(".png", bgra, png);
  return "data:image/png;base64," + base64(std::string(png.begin(), png.end()));
}

cv::Rect tile_rect(const std::array<int64_t, 2>& c, int64_t side, double f) {
  const int x0 = int(std::floor(double(c[0]) * f)), y0 = int(std::floor(double(c[1]) * f));
  const int x1 = int(std::ceil(double(c[0] + side) * f)), y1 = int(std::ceil(double(c[1] + side) * f));
  return {x0, y0, std::max(1, x1 - x0), std::max(1, y1 - y0)};
}

// Transparent picture of the slide's extent: tissue contour (green) and kept tiles (blue outlines).
cv::Mat tissue_and_tiles(const patching::TissueMask& tissue, const patching::TileGrid& grid, cv::Size size, double f) {
  cv::Mat out(size, CV_8UC4, cv::Scalar(0, 0, 0, 0));
  cv::Mat mask(tissue.height, tissue.width, CV_8UC1, const_cast<uint8_t*>(tissue.mask.data()));
  cv::Mat scaled;
  const double mf = tissue.downsample * f;  // overlay pixels per mask pixel
  cv::resize(mask * 255, scaled, cv::Size(std::max(1, int(std::lround(tissue.width * mf))), std::max(1, int(std::lround(tissue.height * mf)))), 0, 0,
             cv::INTER_NEAREST);
  std::vector<std::vector<cv::Point>> contours;
  cv::findContours(scaled, contours, cv::RETR_LIST, cv::CHAIN_APPROX_SIMPLE);
  for (const auto& c : grid.coords) cv::rectangle(out, tile_rect(c, grid.tile_size_level0, f), cv::Scalar(255, 120, 0, 200), 1);
  cv::drawContours(out, contours, -1, cv::Scalar(0, 200, 0, 255), 3);
  return out;
}

cv::Vec3b viridis(double t) {
  cv::Mat v(1, 1, CV_8UC1, cv::Scalar(int(std::lround(std::clamp(t, 0.0, 1.0) * 255)))), c;
  cv::applyColorMap(v, c, cv::COLORMAP_VIRIDIS);
  return c.at<cv::Vec3b>(0, 0);
}

cv::Mat heat_map(const patching::TileGrid& grid, const TileScores& heat, double lo, double hi, cv::Size size, double f) {
  cv::Mat out(size, CV_8UC4, cv::Scalar(0, 0, 0, 0));
  for (size_t i = 0; i < grid.coords.size(); ++i) {
    const double t = hi > lo ? (double(heat.scores[i]) - lo) / (hi - lo) : 0.5;
    const cv::Vec3b c = viridis(t);
    cv::rectangle(out, tile_rect(grid.coords[i], grid.tile_size_level0, f), cv::Scalar(c[0], c[1], c[2], 255), cv::FILLED);
  }
  return out;
}

}  // namespace

void write_wsi_report(const std::string& page, const io::Slide& slide, const patching::TissueMask& tissue,
                      const patching::TileGrid& grid, const std::optional<TileScores>& heat, const nlohmann::json& facts,
                      bool quiet) {
  if (heat && heat->scores.size() != grid.coords.size())
    throw std::logic_error("write_wsi_report: " + std::to_string(heat->scores.size()) + " scores for " +
                           std::to_string(grid.coords.size()) + " tiles");
  const auto& l0 = slide.info().levels[0];
  DeepZoomOptions dz;
  dz.quiet = quiet;
  write_assets(page, [&](const std::string& dir) { write_deep_zoom(slide, dir, "slide", dz); });

  const double f = double(kOverlaySide) / double(std::max(l0.width, l0.height));  // overlay pixels per level-0 pixel
  const cv::Size size(std::max(1, int(std::lround(l0.width * f))), std::max(1, int(std::lround(l0.height * f))));
  nlohmann::json overlays = nlohmann::json::array();
  overlays.push_back({{"name", "tissue and tiles"}, {"opacity", 1.0}, {"visible", true},
                      {"image", png_data_url(tissue_and_tiles(tissue, grid, size, f))}});
  nlohmann::json coords = nlohmann::json::array();
  for (const auto& c : grid.coords) coords.push_back({c[0], c[1]});
  nlohmann::json data = {
      {"title", "tessera embed-wsi: " + fs::path(slide.info().path).filename().string()},
      {"input", slide.info().path},
      {"slide", {{"width", l0.width}, {"height", l0.height}, {"mpp", slide.info().mpp_x}}},
      {"dzi", {{"url", assets_url(page) + "slide_files/"}, {"format", "jpeg"}, {"tile_size", dz.tile_size}, {"overlap", dz.overlap}}},
      {"tiles", {{"coords", coords}, {"size_level0", grid.tile_size_level0}, {"target_mpp", grid.target_mpp}}},
      {"tissue_fraction", facts.value("tissue_fraction", tissue.tissue_fraction())},
      {"pooling", facts.value("pooling", "")},
      {"heat", nullptr}};
  if (heat) {
    const auto [mn, mx] = std::minmax_element(heat->scores.begin(), heat->scores.end());
    const double lo = *mn, hi = *mx;
    nlohmann::json bar = nlohmann::json::array();
    for (int i = 0; i <= 8; ++i) {
      const cv::Vec3b c = viridis(i / 8.0);
      bar.push_back({c[2], c[1], c[0]});
    }
    data["heat"] = {{"title", heat->title}, {"min", lo}, {"max", hi}, {"colorbar", bar}, {"scores", heat->scores}};
    overlays.push_back({{"name", "heat map"}, {"opacity", 0.6}, {"visible", true}, {"image", png_data_url(heat_map(grid, *heat, lo, hi, size, f))}});
  }
  data["overlays"] = overlays;
  write_page(page, "wsi", data);
}

}  // namespace tessera::apps::report
