// Synthetic sample data the project makes itself (nothing is downloaded):
// a tissue-like slide image and an endoscopy-like video with phase labels.
// The CT phantom lives in ct_phantom.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/io/rgb_image.h"
#include "tessera/io/table_writer.h"

namespace tessera::io {

// H&E-like picture: white glass with a few irregular pink tissue islands,
// purple nuclei scattered inside them. Every pixel is a function of its
// position (and the seed), so any region can be drawn alone: slides larger
// than memory are written region by region (write_pyramid_tiff's renderer).
class SampleSlide {
 public:
  SampleSlide(int width, int height, std::uint32_t seed = 7);
  int width() const { return width_; }
  int height() const { return height_; }
  // The w x h region at (x, y) of the image shrunk `scale` times (pixel (i, j) is level-0 pixel
  // ((x + i) * scale + scale / 2, (y + j) * scale + scale / 2)), as row-major RGB into rgb.
  void render(int scale, int x, int y, int w, int h, std::uint8_t* rgb) const;

 private:
  struct Blob {
    double cx, cy, r, phase1, phase2;
  };
  bool inside(double x, double y) const;
  bool nucleus(int x, int y) const;
  int width_, height_;
  std::uint32_t seed_;
  std::vector<Blob> blobs_;
};

// The whole SampleSlide at level 0, in memory.
RgbImage make_sample_slide_image(int width, int height, std::uint32_t seed = 7);

struct SampleVideoOptions {
  int width = 320, height = 240;
  int fps = 25;
  int seconds = 12;
  std::uint32_t seed = 11;
  std::string codec = "mpeg4";  // any FFmpeg encoder: "libx264" for H.264
  // > 0 and below `seconds`: a segment this long is drawn and encoded once, then repeated
  // (repeat_video) up to `seconds`, each copy with its phases (hours of video in minutes).
  int segment_seconds = 0;
};

// Writes an endoscopy-like clip (textured reddish tissue drifting slowly,
// grey instruments moving over it; which instruments appear depends on the
// surgical phase) and returns the per-second labels as a table with columns
// second, phase_id, phase. Needs FFmpeg.
Table write_sample_video(const std::string& path, const SampleVideoOptions& options = {});

}  // namespace tessera::io
