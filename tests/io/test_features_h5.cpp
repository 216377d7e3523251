// Trident/CLAM feature files: schema, dtypes, attributes, atomic writes.
#include <gtest/gtest.h>

#include <filesystem>

#include "io_test_util.h"
#include "tessera/io/features.h"
#include "tessera/io/features_h5.h"

namespace tessera::io {
namespace {

PatchFeatures sample(std::int64_t n, std::int64_t d) {
  PatchFeatures f;
  f.n = n;
  f.dim = d;
  for (std::int64_t i = 0; i < n; ++i) {
    f.coords.push_back(512 * (i % 7));
    f.coords.push_back(512 * (i / 7) + (std::int64_t{1} << 33));  // beyond int32: must stay int64
  }
  for (std::int64_t i = 0; i < n * d; ++i) f.features.push_back(0.25f * static_cast<float>(i) - 3.f);
  f.patch_size = 256;
  f.patch_size_level0 = 512;
  f.level0_width = 2220;
  f.level0_height = 2967;
  f.target_mpp = 0.5;
  f.level0_mpp = 0.25;
  f.encoder = "vit_tiny";
  f.name = "CMU-1-Small-Region";
  return f;
}

TEST(FeaturesH5, RoundTripKeepsSchemaValuesAndAttributes) {
  TESSERA_SKIP_WITHOUT(built_features().hdf5);
  test::ScratchDir dir;
  const PatchFeatures f = sample(2500, 24);  // more rows than one chunk
  write_patch_features(dir.file("s.h5"), f);
  const PatchFeatures r = read_patch_features(dir.file("s.h5"));
  EXPECT_EQ(r.n, 2500);
  EXPECT_EQ(r.dim, 24);
  EXPECT_EQ(r.coords, f.coords);
  EXPECT_EQ(r.features, f.features);
  EXPECT_EQ(r.patch_size, 256);
  EXPECT_EQ(r.patch_size_level0, 512);
  EXPECT_EQ(r.level0_width, 2220);
  EXPECT_EQ(r.level0_height, 2967);
  EXPECT_DOUBLE_EQ(r.target_mpp, 0.5);
  EXPECT_DOUBLE_EQ(r.level0_mpp, 0.25);
  EXPECT_EQ(r.encoder, "vit_tiny");
  EXPECT_EQ(r.name, "CMU-1-Small-Region");
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string(), "s.h5");
}

TEST(FeaturesH5, EmptySlideIsAValidFile) {
  TESSERA_SKIP_WITHOUT(built_features().hdf5);
  test::ScratchDir dir;
  write_patch_features(dir.file("e.h5"), sample(0, 8));
  const PatchFeatures r = read_patch_features(dir.file("e.h5"));
  EXPECT_EQ(r.n, 0);
  EXPECT_EQ(r.dim, 8);
}

TEST(FeaturesH5, BadShapesAndFilesAreRefusedNamingTheFile) {
  TESSERA_SKIP_WITHOUT(built_features().hdf5);
  test::ScratchDir dir;
  PatchFeatures f = sample(4, 3);
  f.features.pop_back();
  test::expect_error_naming([&] { write_patch_features(dir.file("x.h5"), f); }, dir.file("x.h5"));
  f = sample(4, 3);
  f.coords.pop_back();
  test::expect_error_naming([&] { write_patch_features(dir.file("x.h5"), f); }, dir.file("x.h5"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.h5")));
  test::write_bytes(dir.file("text.h5"), "not hdf5 at all");
  test::expect_error_naming([&] { read_patch_features(dir.file("text.h5")); }, dir.file("text.h5"));
  test::expect_error_naming([&] { read_patch_features(dir.file("absent.h5")); }, dir.file("absent.h5"));
  // A truncated real file.
  write_patch_features(dir.file("ok.h5"), sample(100, 16));
  test::write_truncated_copy(dir.file("ok.h5"), dir.file("cut.h5"), 1500);
  test::expect_error_naming([&] { read_patch_features(dir.file("cut.h5")); }, dir.file("cut.h5"));
}

}  // namespace
}  // namespace tessera::io
