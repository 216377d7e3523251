#include "tessera/patching/slide_tiling.h"

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <cmath>
#include <stdexcept>

namespace tessera::patching {
namespace {

cv::Mat as_mat(const io::RgbImage& img) {
  return cv::Mat(img.height, img.width, CV_8UC3, const_cast<uint8_t*>(img.rgb.data()));
}

io::RgbImage from_mat(const cv::Mat& m) {
  io::RgbImage out(m.cols, m.rows);
  cv::Mat dst(m.rows, m.cols, CV_8UC3, out.rgb.data());
  m.copyTo(dst);
  return out;
}

int mask_level(const io::Slide& slide, int max_side) {
  const auto& lv = slide.info().levels;
  for (size_t l = 0; l < lv.size(); ++l)
    if (lv[l].width <= max_side && lv[l].height <= max_side) return static_cast<int>(l);
  return static_cast<int>(lv.size()) - 1;  // coarsest, even if larger
}

}  // namespace

double TissueMask::tissue_fraction() const {
  if (mask.empty()) return 0;
  size_t n = 0;
  for (uint8_t v : mask) n += v;
  return double(n) / double(mask.size());
}

TissueMask detect_tissue(const io::Slide& slide, const TissueOptions& opts) {
  const io::SlideInfo& info = slide.info();
  TissueMask tm;
  tm.level = mask_level(slide, opts.max_mask_side);
  const auto& lv = info.levels[tm.level];
  tm.downsample = lv.downsample;
  io::RgbImage img = slide.read_region(0, 0, tm.level, lv.width, lv.height);
  // Very large coarsest levels are shrunk further so the mask stays cheap.
  cv::Mat rgb = as_mat(img);
  const int64_t longest = std::max<int64_t>(lv.width, lv.height);
  if (longest > opts.max_mask_side) {
    const double f = double(opts.max_mask_side) / double(longest);
    cv::resize(rgb.clone(), rgb, cv::Size(), f, f, cv::INTER_AREA);
    tm.downsample /= f;
  }
  cv::Mat hsv;
  cv::cvtColor(rgb, hsv, cv::COLOR_RGB2HSV);
  cv::Mat sat;
  cv::extractChannel(hsv, sat, 1);
  cv::medianBlur(sat, sat, opts.median_blur | 1);
  cv::Mat bin;
  tm.otsu_threshold = static_cast<uint8_t>(cv::threshold(sat, bin, 0, 255, cv::THRESH_BINARY | cv::THRESH_OTSU));
  if (opts.close_kernel > 0)
    cv::morphologyEx(bin, bin, cv::MORPH_CLOSE,
                     cv::getStructuringElement(cv::MORPH_RECT, cv::Size(opts.close_kernel, opts.close_kernel)));
  // Areas in mask pixels: µm² over (µm per mask pixel)². Unknown mpp: assume 0.5 µm at level 0.
  const double mpp0 = info.mpp_x > 0 ? info.mpp_x : 0.5;
  const double um_per_px = mpp0 * tm.downsample;
  const double min_island = opts.min_island_area_um2 / (um_per_px * um_per_px);
  const double max_hole = opts.max_hole_area_um2 / (um_per_px * um_per_px);
  // Islands: keep components of at least min_island pixels.
  cv::Mat labels, stats, centroids;
  const int n = cv::connectedComponentsWithStats(bin, labels, stats, centroids, 8, CV_32S);
  cv::Mat kept = cv::Mat::zeros(bin.size(), CV_8U);
  for (int c = 1; c < n; ++c)
    if (stats.at<int>(c, cv::CC_STAT_AREA) >= min_island) kept.setTo(255, labels == c);
  // Holes: background components that do not touch the border and are small get filled.
  cv::Mat inv = 255 - kept;
  const int nh = cv::connectedComponentsWithStats(inv, labels, stats, centroids, 4, CV_32S);
  for (int c = 1; c < nh; ++c) {
    const int x = stats.at<int>(c, cv::CC_STAT_LEFT), y = stats.at<int>(c, cv::CC_STAT_TOP);
    const int w = stats.at<int>(c, cv::CC_STAT_WIDTH), h = stats.at<int>(c, cv::CC_STAT_HEIGHT);
    const bool border = x == 0 || y == 0 || x + w == inv.cols || y + h == inv.rows;
    if (!border && stats.at<int>(c, cv::CC_STAT_AREA) < max_hole) kept.setTo(255, labels == c);
  }
  tm.width = kept.cols;
  tm.height = kept.rows;
  tm.mask.resize(static_cast<size_t>(kept.cols) * kept.rows);
  for (int y = 0; y < kept.rows; ++y)
    for (int x = 0; x < kept.cols; ++x) tm.mask[static_cast<size_t>(y) * kept.cols + x] = kept.at<uint8_t>(y, x) ? 1 : 0;
  return tm;
}

TileGrid make_tile_grid(const io::Slide& slide, const TissueMask& tissue, const TileGridOptions& opts) {
  const io::SlideInfo& info = slide.info();
  if (!(opts.target_mpp > 0)) throw std::invalid_argument(info.path + ": target mpp must be > 0");
  if (opts.tile_size < 1) throw std::invalid_argument(info.path + ": tile size must be >= 1");
  if (!(info.mpp_x > 0))
    throw std::runtime_error(info.path + ": the slide has no microns-per-pixel; give a fallback mpp to tile it at a target mpp");
  TileGrid g;
  g.tile_size = opts.tile_size;
  g.target_mpp = opts.target_mpp;
  g.read_level = slide.best_level_for_mpp(opts.target_mpp);
  const double level_downsample = info.levels[g.read_level].downsample;
  const double exact_read = opts.tile_size * opts.target_mpp / info.mpp_x / level_downsample;
  const double whole = std::round(exact_read / opts.tile_size);
  if (whole >= 1 && std::abs(exact_read / (whole * opts.tile_size) - 1) <= kWholeFactorTolerance) {
    g.read_size = static_cast<int64_t>(whole) * opts.tile_size;
    g.tile_size_level0 = std::max<int64_t>(1, std::llround(double(g.read_size) * level_downsample));
  } else {
    g.tile_size_level0 = std::max<int64_t>(1, std::llround(opts.tile_size * opts.target_mpp / info.mpp_x));
    g.read_size = std::max<int64_t>(1, std::llround(double(g.tile_size_level0) / level_downsample));
  }
  const int64_t W = info.levels[0].width, H = info.levels[0].height;
  g.grid_cols = W / g.tile_size_level0;
  g.grid_rows = H / g.tile_size_level0;
  for (int64_t r = 0; r < g.grid_rows; ++r)
    for (int64_t c = 0; c < g.grid_cols; ++c) {
      const int64_t x0 = c * g.tile_size_level0, y0 = r * g.tile_size_level0;
      // The tile's footprint on the mask, at least one mask pixel.
      const int mx0 = std::min<int>(tissue.width - 1, int(double(x0) / tissue.downsample));
      const int my0 = std::min<int>(tissue.height - 1, int(double(y0) / tissue.downsample));
      const int mx1 = std::max(mx0 + 1, std::min<int>(tissue.width, int(std::ceil(double(x0 + g.tile_size_level0) / tissue.downsample))));
      const int my1 = std::max(my0 + 1, std::min<int>(tissue.height, int(std::ceil(double(y0 + g.tile_size_level0) / tissue.downsample))));
      int64_t on = 0;
      for (int y = my0; y < my1; ++y)
        for (int x = mx0; x < mx1; ++x) on += tissue.mask[static_cast<size_t>(y) * tissue.width + x];
      const double frac = double(on) / double((mx1 - mx0) * (my1 - my0));
      if (frac >= opts.min_tissue_fraction) g.coords.push_back({x0, y0});
    }
  return g;
}

io::RgbImage read_tile(const io::Slide& slide, const TileGrid& grid, size_t index) {
  const auto& c = grid.coords.at(index);
  io::RgbImage raw = slide.read_region(c[0], c[1], grid.read_level, grid.read_size, grid.read_size);
  if (raw.width == grid.tile_size && raw.height == grid.tile_size) return raw;
  cv::Mat out;
  const int interp = raw.width > grid.tile_size ? cv::INTER_AREA : cv::INTER_CUBIC;
  cv::resize(as_mat(raw), out, cv::Size(grid.tile_size, grid.tile_size), 0, 0, interp);
  return from_mat(out);
}

std::string tiling_thumbnail_png(const io::Slide& slide, const TissueMask& tissue, const TileGrid& grid,
                                 int max_side) {
  const auto& lv = slide.info().levels[tissue.level];
  io::RgbImage img = slide.read_region(0, 0, tissue.level, lv.width, lv.height);
  cv::Mat pic;
  const double f = std::min(1.0, double(max_side) / double(std::max(img.width, img.height)));
  cv::resize(as_mat(img), pic, cv::Size(), f, f, cv::INTER_AREA);
  const double px_per_l0 = f / lv.downsample;  // picture pixels per level-0 pixel
  // Tissue contour: the mask scaled to the picture.
  cv::Mat mask(tissue.height, tissue.width, CV_8U, const_cast<uint8_t*>(tissue.mask.data()));
  cv::Mat mask_pic;
  cv::resize(mask * 255, mask_pic, pic.size(), 0, 0, cv::INTER_NEAREST);
  std::vector<std::vector<cv::Point>> contours;
  cv::findContours(mask_pic, contours, cv::RETR_EXTERNAL, cv::CHAIN_APPROX_SIMPLE);
  cv::drawContours(pic, contours, -1, cv::Scalar(0, 200, 0), 2);  // RGB order: green
  for (const auto& c : grid.coords) {
    const cv::Point a(int(c[0] * px_per_l0), int(c[1] * px_per_l0));
    const cv::Point b(int((c[0] + grid.tile_size_level0) * px_per_l0), int((c[1] + grid.tile_size_level0) * px_per_l0));
    cv::rectangle(pic, a, b, cv::Scalar(30, 60, 220), 1);  // blue
  }
  cv::Mat bgr;
  cv::cvtColor(pic, bgr, cv::COLOR_RGB2BGR);
  std::vector<uint8_t> buf;
  if (!cv::imencode(".png", bgr, buf)) throw std::runtime_error(slide.info().path + ": cannot encode the thumbnail");
  return std::string(buf.begin(), buf.end());
}

}  // namespace tessera::patching
