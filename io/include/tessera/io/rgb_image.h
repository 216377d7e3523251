// An 8-bit RGB picture (slide region, video frame, thumbnail): rows top to
// bottom, pixels interleaved R,G,B, no padding between rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera::io {

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<std::uint8_t> rgb;  // width * height * 3

  RgbImage() = default;
  RgbImage(int w, int h) : width(w), height(h), rgb(static_cast<std::size_t>(w) * h * 3, 0) {}
  std::uint8_t* pixel(int x, int y) { return rgb.data() + (static_cast<std::size_t>(y) * width + x) * 3; }
  const std::uint8_t* pixel(int x, int y) const { return rgb.data() + (static_cast<std::size_t>(y) * width + x) * 3; }
};

// OpenSlide hands out premultiplied ARGB (a<<24 | r<<16 | g<<8 | b, r,g,b
// already multiplied by a/255). Converts n such pixels to straight RGB:
// opaque pixels are reordered, partly transparent ones divided by alpha
// (rounded, as openslide-python's argb2rgba does without rounding), fully
// transparent ones (no data: outside the scanned area) become white, the
// background every tissue detector expects.
void premultiplied_argb_to_rgb(const std::uint32_t* argb, std::size_t n, std::uint8_t* rgb);

}  // namespace tessera::io
