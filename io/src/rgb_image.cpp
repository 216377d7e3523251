#include "tessera/io/rgb_image.h"

namespace tessera::io {

void premultiplied_argb_to_rgb(const std::uint32_t* argb, std::size_t n, std::uint8_t* rgb) {
  for (std::size_t i = 0; i < n; ++i, rgb += 3) {
    const std::uint32_t p = argb[i];
    const std::uint32_t a = p >> 24;
    std::uint32_t r = (p >> 16) & 0xff, g = (p >> 8) & 0xff, b = p & 0xff;
    if (a == 0) {
      r = g = b = 255;
    } else if (a != 255) {
      auto straight = [a](std::uint32_t c) {
        const std::uint32_t s = (c * 255 + a / 2) / a;
        return s > 255 ? 255u : s;
      };
      r = straight(r);
      g = straight(g);
      b = straight(b);
    }
    rgb[0] = static_cast<std::uint8_t>(r);
    rgb[1] = static_cast<std::uint8_t>(g);
    rgb[2] = static_cast<std::uint8_t>(b);
  }
}

}  // namespace tessera::io
