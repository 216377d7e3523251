#include "tessera/io/image_file.h"

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <filesystem>
#include <stdexcept>

#include "tessera/io/atomic_file.h"

namespace tessera::io {

void write_image(const std::string& path, const RgbImage& image) {
  if (image.width <= 0 || image.height <= 0) throw std::invalid_argument(path + ": image is empty");
  if (!cv::haveImageWriter(path))
    throw std::runtime_error(path + ": no image writer for extension '" + full_extension(path) + "' (use .png, .jpg, .tif)");
  // OpenCV stores BGR; wrap our RGB buffer and convert.
  const cv::Mat rgb(image.height, image.width, CV_8UC3, const_cast<std::uint8_t*>(image.rgb.data()));
  cv::Mat bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  write_atomically_keeping_extension(path, [&](const std::string& tmp) {
    bool ok = false;
    try {
      ok = cv::imwrite(tmp, bgr);
    } catch (const cv::Exception& e) {
      std::string why = e.err;  // the short reason; e.msg spans several lines
      for (char& ch : why)
        if (ch == '\n') ch = ' ';
      throw std::runtime_error(path + ": cannot write image: " + why);
    }
    if (!ok) throw std::runtime_error(path + ": cannot write image (unknown extension or disk error)");
  });
}

RgbImage read_image(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw std::runtime_error(path + ": no such file");
  const cv::Mat bgr = cv::imread(path, cv::IMREAD_COLOR);
  if (bgr.empty()) throw std::runtime_error(path + ": not an image OpenCV can read");
  RgbImage out(bgr.cols, bgr.rows);
  cv::Mat rgb(bgr.rows, bgr.cols, CV_8UC3, out.rgb.data());
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  return out;
}

}  // namespace tessera::io
