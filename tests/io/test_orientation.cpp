// Canonical RAS orientation (MONAI's Orientation("RAS")) and its exact inverse.
#include <gtest/gtest.h>

#include <cmath>

#include "tessera/io/ct_phantom.h"
#include "tessera/io/orientation.h"

namespace tessera::io {
namespace {

Volume ramp(const Geometry& g) {
  Volume v = Volume::zeros(g, PixelType::kInt32);
  auto* p = v.data<std::int32_t>();
  for (std::int64_t i = 0; i < g.voxel_count(); ++i) p[i] = static_cast<std::int32_t>(i);
  v.source = "ramp";
  return v;
}

TEST(Orientation, CodesUsePointsToLetters) {
  Mat3 identity{{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}};
  EXPECT_EQ(orientation_code(identity), "LPS");  // ITK identity
  Mat3 ras{{{-1, 0, 0}, {0, -1, 0}, {0, 0, 1}}};
  EXPECT_EQ(orientation_code(ras), "RAS");
  Mat3 pir{{{0, 0, -1}, {1, 0, 0}, {0, -1, 0}}};  // index 0 along +y (P), 1 along -z (I), 2 along -x (R)
  EXPECT_EQ(orientation_code(pir), "PIR");
}

TEST(Orientation, LpsToRasFlipsFirstTwoAxesAndMovesOrigin) {
  Geometry g;
  g.size = {3, 2, 2};
  g.spacing = {2, 3, 4};
  g.origin = {10, 20, 30};
  const Volume v = ramp(g);
  Reorientation r;
  const Volume ras = reorient_to_ras(v, &r);
  EXPECT_EQ(orientation_code(ras.geometry.direction), "RAS");
  EXPECT_EQ(ras.geometry.direction[0][0], -1);
  EXPECT_EQ(ras.geometry.direction[1][1], -1);
  EXPECT_EQ(ras.geometry.direction[2][2], 1);
  // The new first voxel is the old voxel (2, 1, 0): at x = 10 + 2*2, y = 20 + 1*3.
  EXPECT_DOUBLE_EQ(ras.geometry.origin[0], 14);
  EXPECT_DOUBLE_EQ(ras.geometry.origin[1], 23);
  EXPECT_DOUBLE_EQ(ras.geometry.origin[2], 30);
  EXPECT_EQ(ras.data<std::int32_t>()[0], 2 + 1 * 3);
  // Every voxel keeps its physical position.
  for (std::int64_t k = 0; k < 2; ++k)
    for (std::int64_t j = 0; j < 2; ++j)
      for (std::int64_t i = 0; i < 3; ++i) {
        const auto p = ras.geometry.index_to_physical(i, j, k);
        const std::int64_t si = static_cast<std::int64_t>((p[0] - 10) / 2), sj = static_cast<std::int64_t>((p[1] - 20) / 3);
        EXPECT_EQ(ras.data<std::int32_t>()[i + 3 * (j + 2 * k)], si + 3 * (sj + 2 * k));
      }
}

TEST(Orientation, ObliquePhantomRoundTripsExactly) {
  const CtPhantom p = make_ct_phantom({{20, 16, 6}, {0.9, 0.8, 2.5}, 12, 5, 3});
  for (const char* code : {"RAS", "LPS", "PIR", "SAL"}) {
    Reorientation r;
    const Volume out = reorient(p.ct, code, &r);
    EXPECT_EQ(orientation_code(out.geometry.direction), code);
    // Voxel centres stay put: the first voxel of the output is where its data came from.
    const Volume back = undo_reorientation(out, r);
    EXPECT_EQ(back.geometry, p.ct.geometry) << code;
    EXPECT_EQ(back.bytes, p.ct.bytes) << code;
  }
}

TEST(Orientation, PermutedAxesKeepPhysicalPositions) {
  Geometry g;
  g.size = {4, 3, 2};
  g.spacing = {1, 2, 5};
  g.origin = {-5, 7, 11};
  g.direction = {{{0, 0, -1}, {1, 0, 0}, {0, -1, 0}}};  // PIR
  const Volume v = ramp(g);
  const Volume ras = reorient_to_ras(v);
  EXPECT_EQ(ras.geometry.size, (std::array<std::int64_t, 3>{2, 4, 3}));
  // Map every output voxel's centre back to an input index and compare values.
  for (std::int64_t k = 0; k < 3; ++k)
    for (std::int64_t j = 0; j < 4; ++j)
      for (std::int64_t i = 0; i < 2; ++i) {
        const auto p = ras.geometry.index_to_physical(i, j, k);
        // Inverse of the PIR geometry: index = D^T (p - o) / spacing.
        double idx[3];
        for (int c = 0; c < 3; ++c) {
          double s = 0;
          for (int r = 0; r < 3; ++r) s += g.direction[r][c] * (p[r] - g.origin[r]);
          idx[c] = s / g.spacing[c];
        }
        const auto li = static_cast<std::int64_t>(std::lround(idx[0]) + 4 * (std::lround(idx[1]) + 3 * std::lround(idx[2])));
        EXPECT_EQ(ras.data<std::int32_t>()[i + 2 * (j + 4 * k)], li);
      }
}

TEST(Orientation, BadCodesAndMismatchedSizesAreRefused) {
  const CtPhantom p = make_ct_phantom({{6, 5, 4}, {1, 1, 1}, 0, 0, 1});
  EXPECT_THROW(reorient(p.ct, "RAR", nullptr), std::invalid_argument);
  EXPECT_THROW(reorient(p.ct, "RA", nullptr), std::invalid_argument);
  Reorientation r;
  const Volume ras = reorient_to_ras(p.ct, &r);
  Volume wrong = Volume::zeros(Geometry{{4, 4, 4}, {1, 1, 1}, {0, 0, 0}, ras.geometry.direction}, PixelType::kUInt8);
  EXPECT_THROW(undo_reorientation(wrong, r), std::invalid_argument);
}

}  // namespace
}  // namespace tessera::io
