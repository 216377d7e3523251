// Whole-slide images: the real Aperio sample, a pyramid we write ourselves
// (known pixels and mpp), level choice and concurrent reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "io_test_util.h"
#include "tessera/io/features.h"
#include "tessera/io/pyramid_tiff.h"
#include "tessera/io/slide.h"

namespace tessera::io {
namespace {

// A slide whose pixels are a function of position, so reads can be checked.
RgbImage pattern(int w, int h) {
  RgbImage img(w, h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      auto* p = img.pixel(x, y);
      p[0] = static_cast<std::uint8_t>(x & 0xff);
      p[1] = static_cast<std::uint8_t>(y & 0xff);
      p[2] = static_cast<std::uint8_t>((x / 256 + 4 * (y / 256)) * 20);
    }
  return img;
}

TEST(Slide, RealAperioSampleHasItsKnownMetadata) {
  TESSERA_SKIP_WITHOUT(built_features().openslide);
  const std::string path = test::shared_data("CMU-1-Small-Region.svs");
  if (path.empty()) GTEST_SKIP() << "../shared/data/CMU-1-Small-Region.svs absent";
  const Slide s(path);
  const SlideInfo& in = s.info();
  EXPECT_EQ(in.vendor, "aperio");
  ASSERT_EQ(s.level_count(), 1);
  EXPECT_EQ(in.levels[0].width, 2220);
  EXPECT_EQ(in.levels[0].height, 2967);
  EXPECT_NEAR(in.mpp_x, 0.499, 1e-9);
  EXPECT_EQ(in.mpp_source, "openslide.mpp");
  EXPECT_GT(in.objective_power, 0);
  for (const char* name : {"label", "macro", "thumbnail"})
    EXPECT_NE(std::find(in.associated.begin(), in.associated.end(), name), in.associated.end()) << name;
  const RgbImage label = s.read_associated("label");
  EXPECT_EQ(label.width, 387);
  const RgbImage tile = s.read_region(1000, 1000, 0, 64, 48);
  EXPECT_EQ(tile.width, 64);
  EXPECT_EQ(tile.height, 48);
  // Outside the scanned area OpenSlide returns transparent pixels: white for us.
  const RgbImage outside = s.read_region(-200, -200, 0, 16, 16);
  for (auto v : outside.rgb) ASSERT_EQ(v, 255);
  EXPECT_EQ(s.best_level_for_mpp(0.5), 0);
  EXPECT_EQ(s.best_level_for_mpp(2.0), 0);
}

TEST(Slide, WrittenPyramidReadsBackWithMppLevelsAndPixels) {
  TESSERA_SKIP_WITHOUT(built_features().openslide && built_features().tiff);
  test::ScratchDir dir;
  const std::string path = dir.file("pyr.svs");
  const RgbImage img = pattern(1100, 900);
  PyramidTiffOptions opt;
  opt.mpp = 0.25;
  opt.objective_power = 40;
  opt.tile_size = 128;
  opt.min_level_size = 200;
  write_pyramid_tiff(path, img, opt);
  const Slide s(path);
  EXPECT_EQ(s.info().vendor, "aperio");
  ASSERT_EQ(s.level_count(), 3);  // 1100, 550, 275 wide
  EXPECT_EQ(s.info().levels[1].width, 550);
  EXPECT_EQ(s.info().levels[2].height, 225);
  EXPECT_NEAR(s.info().levels[2].downsample, 4.0, 1e-9);
  EXPECT_NEAR(s.info().mpp_x, 0.25, 1e-9);
  EXPECT_NEAR(s.level_mpp(2), 1.0, 1e-9);
  EXPECT_DOUBLE_EQ(s.info().objective_power, 40);
  EXPECT_EQ(s.best_level_for_mpp(0.25), 0);
  EXPECT_EQ(s.best_level_for_mpp(0.5), 1);
  EXPECT_EQ(s.best_level_for_mpp(0.54), 1);  // within 10 %
  EXPECT_EQ(s.best_level_for_mpp(0.56), 1);
  EXPECT_EQ(s.best_level_for_mpp(1.05), 2);
  EXPECT_EQ(s.best_level_for_mpp(8.0), 2);
  // Lossless deflate: level-0 pixels come back exactly, across tile edges.
  const RgbImage r = s.read_region(120, 250, 0, 20, 10);
  for (int y = 0; y < 10; ++y)
    for (int x = 0; x < 20; ++x)
      for (int c = 0; c < 3; ++c) ASSERT_EQ(r.pixel(x, y)[c], img.pixel(120 + x, 250 + y)[c]) << x << "," << y;
  // Level 1 is the 2x2 mean of level 0; regions are placed in level-0 pixels.
  const RgbImage r1 = s.read_region(200, 100, 1, 8, 6);
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 8; ++x)
      for (int c = 0; c < 3; ++c) {
        const int sx = 200 + 2 * x, sy = 100 + 2 * y;
        const int sum = img.pixel(sx, sy)[c] + img.pixel(sx + 1, sy)[c] + img.pixel(sx, sy + 1)[c] +
                        img.pixel(sx + 1, sy + 1)[c];
        ASSERT_EQ(r1.pixel(x, y)[c], (sum + 2) / 4) << x << "," << y;
      }
  EXPECT_THROW(s.read_region(0, 0, 3, 4, 4), std::out_of_range);
  EXPECT_THROW(s.read_region(0, 0, 0, 0, 4), std::invalid_argument);
}

TEST(Slide, ConcurrentReadsAgreeWithSerialOnes) {
  TESSERA_SKIP_WITHOUT(built_features().openslide && built_features().tiff);
  test::ScratchDir dir;
  const std::string path = dir.file("pyr.svs");
  const RgbImage img = pattern(768, 768);
  write_pyramid_tiff(path, img, {0.5, 20, 128, 128});
  const Slide s(path);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        const int x = (t * 97 + i * 61) % 700, y = (t * 31 + i * 43) % 700;
        const RgbImage r = s.read_region(x, y, 0, 32, 32);
        for (int yy = 0; yy < 32; ++yy)
          for (int xx = 0; xx < 32; ++xx)
            if (std::memcmp(r.pixel(xx, yy), img.pixel(x + xx, y + yy), 3) != 0) ++mismatches;
      }
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(Slide, MissingMppFallsBackInOrderAndSaysWhere) {
  TESSERA_SKIP_WITHOUT(built_features().openslide && built_features().tiff);
  test::ScratchDir dir;
  const RgbImage img = pattern(512, 512);
  PyramidTiffOptions generic{0.5, 20, 128, 256, false, true};
  write_pyramid_tiff(dir.file("tags.tif"), img, generic);
  const Slide with_tags(dir.file("tags.tif"));
  EXPECT_EQ(with_tags.info().vendor, "generic-tiff");
  EXPECT_EQ(with_tags.info().mpp_source, "tiff.XResolution");
  EXPECT_NEAR(with_tags.info().mpp_x, 0.5, 1e-5);

  generic.resolution_tags = false;
  write_pyramid_tiff(dir.file("bare.tif"), img, generic);
  const Slide bare(dir.file("bare.tif"));
  EXPECT_EQ(bare.info().mpp_source, "unknown");
  EXPECT_EQ(bare.info().mpp_x, 0);
  test::expect_error_naming([&] { bare.best_level_for_mpp(0.5); }, dir.file("bare.tif"));
  SlideOpenOptions opt;
  opt.fallback_mpp = 0.3;
  const Slide given(dir.file("bare.tif"), opt);
  EXPECT_EQ(given.info().mpp_source, "fallback");
  EXPECT_DOUBLE_EQ(given.info().mpp_x, 0.3);

  // A slide with its own mpp ignores the fallback.
  write_pyramid_tiff(dir.file("aperio.svs"), img, {0.25, 40, 128, 256});
  EXPECT_NEAR(Slide(dir.file("aperio.svs"), opt).info().mpp_x, 0.25, 1e-9);
}

}  // namespace
}  // namespace tessera::io
