#include "report_deepzoom.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <mutex>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <vector>

#include "progress.h"
#include "tessera/io/atomic_file.h"

namespace tessera::apps::report {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxRead = int64_t(8192) * 8192;  // pixels of the coarsest level read at once

cv::Mat to_bgr(const io::RgbImage& img) {
  cv::Mat rgb(img.height, img.width, CV_8UC3, const_cast<uint8_t*>(img.rgb.data()));
  cv::Mat bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  return bgr;
}

}  // namespace

void write_deep_zoom(const io::Slide& slide, const std::string& dir, const std::string& name, const DeepZoomOptions& o) {
  const auto& levels = slide.info().levels;
  const int64_t W = levels[0].width, H = levels[0].height;
  const int max_level = int(std::ceil(std::log2(double(std::max(W, H)))));
  // The coarsest OpenSlide level, read once: the small Deep Zoom levels come from it.
  const int coarse_level = int(levels.size()) - 1;
  const double coarse_ds = levels[coarse_level].downsample;
  if (levels[coarse_level].width * levels[coarse_level].height > kMaxRead)
    throw std::runtime_error(slide.info().path + ": the coarsest level is " + std::to_string(levels[coarse_level].width) + "x" +
                             std::to_string(levels[coarse_level].height) + " px; the report's Deep Zoom pyramid needs a pyramidal slide");
  const cv::Mat coarse = to_bgr(slide.read_region(0, 0, coarse_level, levels[coarse_level].width, levels[coarse_level].height));

  struct Tile { int level, col, row; };
  std::vector<Tile> tiles;
  for (int L = max_level; L >= 0; --L) {
    const double s = std::ldexp(1.0, max_level - L);
    const int64_t w = int64_t(std::ceil(double(W) / s)), h = int64_t(std::ceil(double(H) / s));
    const int cols = int((w + o.tile_size - 1) / o.tile_size), rows = int((h + o.tile_size - 1) / o.tile_size);
    fs::create_directories(fs::path(dir) / (name + "_files") / std::to_string(L));
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) tiles.push_back({L, c, r});
  }
  Progress bar("deep zoom", int64_t(tiles.size()), o.quiet);
  std::exception_ptr error;
  std::mutex mu;
  int64_t done = 0;
#pragma omp parallel for schedule(dynamic, 8)
  for (int64_t t = 0; t < int64_t(tiles.size()); ++t) {
    try {
      const Tile& tl = tiles[t];
      const double s = std::ldexp(1.0, max_level - tl.level);
      const int64_t w = int64_t(std::ceil(double(W) / s)), h = int64_t(std::ceil(double(H) / s));
      const int64_t x0 = std::max<int64_t>(0, int64_t(tl.col) * o.tile_size - o.overlap);
      const int64_t y0 = std::max<int64_t>(0, int64_t(tl.row) * o.tile_size - o.overlap);
      const int64_t x1 = std::min<int64_t>(w, int64_t(tl.col + 1) * o.tile_size + o.overlap);
      const int64_t y1 = std::min<int64_t>(h, int64_t(tl.row + 1) * o.tile_size + o.overlap);
      const cv::Size out_size(int(x1 - x0), int(y1 - y0));
      cv::Mat src;
      if (s >= coarse_ds) {
        const double f = s / coarse_ds;  // coarse pixels per tile pixel
        const cv::Rect want(int(std::floor(x0 * f)), int(std::floor(y0 * f)), std::max(1, int(std::ceil((x1 - x0) * f))),
                            std::max(1, int(std::ceil((y1 - y0) * f))));
        src = coarse(want & cv::Rect(0, 0, coarse.cols, coarse.rows));
      } else {
        int l = 0;
        for (int i = 0; i < int(levels.size()); ++i)
          if (levels[i].downsample <= s * 1.001) l = i;
        const double f = s / levels[l].downsample;  // level-l pixels per tile pixel
        src = to_bgr(slide.read_region(int64_t(x0 * s), int64_t(y0 * s), l, std::max<int64_t>(1, int64_t(std::ceil((x1 - x0) * f))),
                                       std::max<int64_t>(1, int64_t(std::ceil((y1 - y0) * f)))));
      }
      cv::Mat tile;
      cv::resize(src, tile, out_size, 0, 0, cv::INTER_AREA);
      std::vector<uint8_t> jpeg;
      cv::imencode(".jpeg", tile, jpeg, {cv::IMWRITE_JPEG_QUALITY, o.jpeg_quality});
      const fs::path p = fs::path(dir) / (name + "_files") / std::to_string(tl.level) / (std::to_string(tl.col) + "_" + std::to_string(tl.row) + ".jpeg");
      io::write_file_atomically(p.string(), std::string(jpeg.begin(), jpeg.end()));
      std::lock_guard<std::mutex> lock(mu);
      bar.update(++done);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  bar.finish();
  const std::string dzi = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                          "<Image xmlns=\"http://schemas.microsoft.com/deepzoom/2008\" Format=\"jpeg\" Overlap=\"" +
                          std::to_string(o.overlap) + "\" TileSize=\"" + std::to_string(o.tile_size) + "\">\n  <Size Width=\"" +
                          std::to_string(W) + "\" Height=\"" + std::to_string(H) + "\"/>\n</Image>\n";
  io::write_file_atomically((fs::path(dir) / (name + ".dzi")).string(), dzi);
}

}  // namespace tessera::apps::report
