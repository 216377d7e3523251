// OpenSlide's premultiplied ARGB to straight RGB.
#include <gtest/gtest.h>

#include "tessera/io/rgb_image.h"

namespace tessera::io {
namespace {

TEST(Argb, OpaqueTransparentAndPartialPixels) {
  const std::uint32_t px[] = {
      0xff102030u,  // opaque: reorder only
      0x00000000u,  // transparent: white
      0x80402010u,  // alpha 128, premultiplied (64,32,16) -> straight (128,64,32) rounded
      0x01010101u,  // alpha 1, value 1 -> 255
  };
  std::uint8_t rgb[12];
  premultiplied_argb_to_rgb(px, 4, rgb);
  EXPECT_EQ(rgb[0], 0x10);
  EXPECT_EQ(rgb[1], 0x20);
  EXPECT_EQ(rgb[2], 0x30);
  for (int i = 3; i < 6; ++i) EXPECT_EQ(rgb[i], 255);
  EXPECT_EQ(rgb[6], (64 * 255 + 64) / 128);
  EXPECT_EQ(rgb[7], (32 * 255 + 64) / 128);
  EXPECT_EQ(rgb[8], (16 * 255 + 64) / 128);
  for (int i = 9; i < 12; ++i) EXPECT_EQ(rgb[i], 255);
}

TEST(Argb, StraightValuesSurvivePremultiplication) {
  // Premultiply every (c, a) with rounding and check we get c back within 1.
  for (std::uint32_t a = 1; a < 256; a += 7)
    for (std::uint32_t c = 0; c < 256; c += 5) {
      const std::uint32_t pm = (c * a + 127) / 255;
      const std::uint32_t px = a << 24 | pm << 16 | pm << 8 | pm;
      std::uint8_t rgb[3];
      premultiplied_argb_to_rgb(&px, 1, rgb);
      // Premultiplying loses precision at small alpha; the bound is 255/(2a)+1.
      EXPECT_NEAR(rgb[0], static_cast<double>(c), 255.0 / (2 * a) + 1) << "a=" << a << " c=" << c;
    }
}

}  // namespace
}  // namespace tessera::io
