// Slide tiling on the real Aperio sample (shared/data/CMU-1-Small-Region.svs:
// 2220×2967 at 0.499 µm/px, one level).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "tessera/io/atomic_file.h"

#include "tessera/patching/slide_tiling.h"
#include "tessera/patching/tile_loader.h"

namespace {

using namespace tessera;

const std::string kSlide = std::string(TESSERA_SHARED_DATA) + "/CMU-1-Small-Region.svs";

class SlideTiling : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kSlide)) GTEST_SKIP() << kSlide << " not present";
  }
};

TEST_F(SlideTiling, TissueMaskCoversPartOfTheSlide) {
  io::Slide slide(kSlide);
  auto tissue = patching::detect_tissue(slide);
  // The single 2220×2967 level is larger than max_mask_side (2048): the mask is shrunk to fit.
  EXPECT_NEAR(tissue.width * tissue.downsample, 2220, 2);
  EXPECT_NEAR(tissue.height * tissue.downsample, 2967, 2);
  EXPECT_LE(std::max(tissue.width, tissue.height), 2048);
  // The sample is a small region of a tissue section on glass: much tissue, some background.
  EXPECT_GT(tissue.tissue_fraction(), 0.2);
  EXPECT_LT(tissue.tissue_fraction(), 0.98);
  EXPECT_GT(tissue.otsu_threshold, 0);
}

TEST_F(SlideTiling, GridAtHalfMicronKeepsTissueTilesInsideTheSlide) {
  io::Slide slide(kSlide);
  auto tissue = patching::detect_tissue(slide);
  patching::TileGridOptions o;
  o.target_mpp = 0.5;
  o.tile_size = 224;
  auto grid = patching::make_tile_grid(slide, tissue, o);
  // 224 px at 0.5 µm over 0.499 µm/px level-0 pixels: 224.45 → 224 level-0 pixels.
  EXPECT_EQ(grid.tile_size_level0, 224);
  EXPECT_EQ(grid.grid_cols, 2220 / 224);
  EXPECT_EQ(grid.grid_rows, 2967 / 224);
  EXPECT_EQ(grid.read_level, 0);
  ASSERT_GT(grid.coords.size(), 10u);
  EXPECT_LT(grid.coords.size(), size_t(grid.grid_cols * grid.grid_rows));
  for (const auto& c : grid.coords) {
    EXPECT_EQ(c[0] % 224, 0);
    EXPECT_EQ(c[1] % 224, 0);
    EXPECT_LE(c[0] + 224, 2220);
    EXPECT_LE(c[1] + 224, 2967);
    // the tile's centre lies on tissue in the mask
    const int mx = int((c[0] + 112) / tissue.downsample), my = int((c[1] + 112) / tissue.downsample);
    int on = 0;
    for (int dy = -3; dy <= 3; ++dy)
      for (int dx = -3; dx <= 3; ++dx) {
        const int x = std::clamp(mx + dx, 0, tissue.width - 1), y = std::clamp(my + dy, 0, tissue.height - 1);
        on += tissue.mask[size_t(y) * tissue.width + x];
      }
    EXPECT_GT(on, 0);
  }
  // A coarser target reads larger footprints: 1 µm/px → 448.9 level-0 pixels per 224-px tile, within 2 % of twice
  // the tile size, so read as 448 and halved.
  o.target_mpp = 1.0;
  auto coarse = patching::make_tile_grid(slide, tissue, o);
  EXPECT_EQ(coarse.tile_size_level0, 448);
  EXPECT_EQ(patching::read_tile(slide, coarse, 0).width, 224);
}

TEST_F(SlideTiling, FootprintsNearAWholeMultipleOfTheTileAreReadAtThatMultiple) {
  io::Slide slide(kSlide);  // 0.499 µm/px
  const auto tissue = patching::detect_tissue(slide);
  patching::TileGridOptions o;
  o.tile_size = 224;
  const auto footprint = [&](double mpp) {
    o.target_mpp = mpp;
    const auto g = patching::make_tile_grid(slide, tissue, o);
    EXPECT_EQ(g.read_size, g.tile_size_level0) << mpp;  // one level
    return g.tile_size_level0;
  };
  EXPECT_EQ(footprint(0.505), 224);  // 226.7: 1.2 % over 224
  EXPECT_EQ(footprint(0.51), 229);   // 228.9: 2.2 % over, read as it is and resized
  EXPECT_EQ(footprint(0.7), 314);    // 1.40 times the tile: no whole multiple near
  EXPECT_EQ(footprint(1.49), 672);   // 668.9: 0.5 % under three tiles

  // Read at twice the tile size, a tile is the 2×2 box average of the region (rounded), nothing else.
  o.target_mpp = 1.0;
  const auto g = patching::make_tile_grid(slide, tissue, o);
  ASSERT_EQ(g.read_size, 448);
  ASSERT_FALSE(g.coords.empty());
  const io::RgbImage region = slide.read_region(g.coords[0][0], g.coords[0][1], 0, 448, 448);
  const io::RgbImage tile = patching::read_tile(slide, g, 0);
  ASSERT_EQ(tile.width, 224);
  int worst = 0;
  for (int y = 0; y < 224; ++y)
    for (int x = 0; x < 224; ++x)
      for (int c = 0; c < 3; ++c) {
        const auto at = [&](int yy, int xx) { return int(region.rgb[(size_t(yy) * 448 + xx) * 3 + c]); };
        const int box = (at(2 * y, 2 * x) + at(2 * y, 2 * x + 1) + at(2 * y + 1, 2 * x) + at(2 * y + 1, 2 * x + 1) + 2) / 4;
        worst = std::max(worst, std::abs(box - int(tile.rgb[(size_t(y) * 224 + x) * 3 + c])));
      }
  EXPECT_LE(worst, 1);
}

TEST_F(SlideTiling, LoaderDeliversEveryTileInOrder) {
  io::Slide slide(kSlide);
  auto tissue = patching::detect_tissue(slide);
  auto grid = patching::make_tile_grid(slide, tissue);
  patching::TileLoaderOptions lo;
  lo.batch_size = 7;
  lo.threads = 3;
  lo.prefetch_batches = 2;
  patching::TileLoader loader(slide, grid, lo);
  patching::TileBatch batch;
  int64_t seen = 0;
  while (loader.next(batch)) {
    ASSERT_EQ(batch.images.size(0), int64_t(batch.indices.size()));
    ASSERT_EQ(batch.images.scalar_type(), at::kByte);
    for (size_t i = 0; i < batch.indices.size(); ++i) {
      EXPECT_EQ(batch.indices[i], seen + int64_t(i));
      const auto tile = patching::read_tile(slide, grid, size_t(seen) + i);  // every tile, byte for byte
      ASSERT_EQ(batch.images[int64_t(i)].sizes(), (std::vector<int64_t>{tile.height, tile.width, 3}));
      EXPECT_EQ(std::memcmp(batch.images[int64_t(i)].data_ptr<uint8_t>(), tile.rgb.data(), tile.rgb.size()), 0);
    }
    seen += int64_t(batch.indices.size());
  }
  EXPECT_EQ(seen, int64_t(grid.coords.size()));
  EXPECT_FALSE(loader.next(batch));
}

TEST_F(SlideTiling, NormaliseTilesIsPerChannelAndKeepsTheLayout) {
  io::Slide slide(kSlide);
  auto grid = patching::make_tile_grid(slide, patching::detect_tissue(slide));
  const auto tile = patching::read_tile(slide, grid, 0);
  const std::array<float, 3> mean = {0.485f, 0.456f, 0.406f}, std = {0.229f, 0.224f, 0.225f};
  const auto x = patching::normalise_tile(tile, mean, std);
  ASSERT_EQ(x.sizes(), (std::vector<int64_t>{3, tile.height, tile.width}));
  for (int c = 0; c < 3; ++c)  // pixel (x 5, y 3), channel c: (v/255 - mean) / std
    EXPECT_NEAR(x[c][3][5].item<float>(), (tile.pixel(5, 3)[c] / 255.f - mean[c]) / std[c], 1e-5);
  const auto u8 = at::from_blob(const_cast<uint8_t*>(tile.rgb.data()), {1, tile.height, tile.width, 3}, at::kByte);
  const auto bf = patching::normalise_tiles(u8, mean, std, at::kBFloat16);
  EXPECT_EQ(bf.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(bf[0], x.to(at::kBFloat16)));
  EXPECT_THROW(patching::normalise_tiles(u8.to(at::kFloat), mean, std), std::invalid_argument);
}

// GigaPath's Resize(256) + CenterCrop(224) on 256-pixel tiles: the middle 224 pixels, offset 16.
TEST_F(SlideTiling, LoaderCentreCropsAsTorchvision) {
  io::Slide slide(kSlide);
  auto tissue = patching::detect_tissue(slide);
  patching::TileGridOptions o;
  o.tile_size = 256;
  auto grid = patching::make_tile_grid(slide, tissue, o);
  patching::TileLoaderOptions lo;
  lo.batch_size = 2;
  lo.crop = 224;
  patching::TileLoader loader(slide, grid, lo);
  patching::TileBatch batch;
  ASSERT_TRUE(loader.next(batch));
  ASSERT_EQ(batch.images.sizes(), (std::vector<int64_t>{2, 224, 224, 3}));
  const auto t = patching::read_tile(slide, grid, 1);
  const auto full = at::from_blob(const_cast<uint8_t*>(t.rgb.data()), {t.height, t.width, 3}, at::kByte);
  EXPECT_TRUE(at::equal(batch.images[1], full.narrow(0, 16, 224).narrow(1, 16, 224)));
  lo.crop = 257;
  EXPECT_THROW(patching::TileLoader(slide, grid, lo), std::invalid_argument);
}

TEST_F(SlideTiling, ThumbnailIsAPng) {
  io::Slide slide(kSlide);
  auto tissue = patching::detect_tissue(slide);
  auto grid = patching::make_tile_grid(slide, tissue);
  const std::string png = patching::tiling_thumbnail_png(slide, tissue, grid, 512);
  ASSERT_GT(png.size(), 1000u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
  if (const char* out = std::getenv("TESSERA_TEST_ARTIFACTS")) tessera::io::write_file_atomically(std::string(out) + "/tiling.png", png);
}

}  // namespace
