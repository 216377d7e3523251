// 2D pictures through OpenCV: lossless round trip, atomic write, clear errors.
#include <gtest/gtest.h>

#include <filesystem>

#include "io_test_util.h"
#include "tessera/io/features.h"
#include "tessera/io/image_file.h"

namespace tessera::io {
namespace {

TEST(ImageFile, PngRoundTripKeepsRgbOrder) {
  TESSERA_SKIP_WITHOUT(built_features().opencv);
  test::ScratchDir dir;
  RgbImage img(7, 5);
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 7; ++x) {
      auto* p = img.pixel(x, y);
      p[0] = static_cast<std::uint8_t>(30 * x);  // red grows to the right
      p[1] = static_cast<std::uint8_t>(40 * y);
      p[2] = 200;
    }
  write_image(dir.file("a.png"), img);
  const RgbImage back = read_image(dir.file("a.png"));
  EXPECT_EQ(back.width, 7);
  EXPECT_EQ(back.height, 5);
  EXPECT_EQ(back.rgb, img.rgb);
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string(), "a.png");
}

TEST(ImageFile, BadPathsAndContentNameTheFile) {
  TESSERA_SKIP_WITHOUT(built_features().opencv);
  test::ScratchDir dir;
  test::expect_error_naming([&] { read_image(dir.file("absent.png")); }, dir.file("absent.png"));
  test::write_bytes(dir.file("text.png"), "not a png");
  test::expect_error_naming([&] { read_image(dir.file("text.png")); }, dir.file("text.png"));
  test::expect_error_naming([&] { write_image(dir.file("x.unknownext"), RgbImage(2, 2)); }, dir.file("x.unknownext"));
  test::expect_error_naming([&] { write_image(dir.file("e.png"), RgbImage()); }, dir.file("e.png"));
}

}  // namespace
}  // namespace tessera::io
