// check_slice_stack: regular stacks pass (axial, oblique, either direction);
// missing slices, uneven steps, gantry tilt, mixed orientations and duplicate
// positions are refused with one line naming the folder.
#include <gtest/gtest.h>

#include <cmath>

#include "io_test_util.h"
#include "tessera/io/slice_stack.h"

namespace tessera::io {
namespace {

// n slices of an orientation (row, column), stepping `step` along the normal plus `shear` in the row direction.
std::vector<SliceGeometry> stack(int n, const Vec3& row, const Vec3& col, double step, double shear = 0) {
  const Vec3 nrm = {row[1] * col[2] - row[2] * col[1], row[2] * col[0] - row[0] * col[2], row[0] * col[1] - row[1] * col[0]};
  std::vector<SliceGeometry> s(n);
  for (int k = 0; k < n; ++k) {
    s[k].file = "/d/IM" + std::to_string(k) + ".dcm";
    for (int i = 0; i < 3; ++i) s[k].position[i] = 10 * i - 40 + k * (step * nrm[i] + shear * row[i]);
    s[k].orientation = {row[0], row[1], row[2], col[0], col[1], col[2]};
  }
  return s;
}

const Vec3 kRow = {1, 0, 0}, kCol = {0, 1, 0};

TEST(SliceStack, RegularStacksPass) {
  EXPECT_NO_THROW(check_slice_stack("/d", stack(40, kRow, kCol, 2.5)));
  EXPECT_NO_THROW(check_slice_stack("/d", stack(40, kRow, kCol, -0.625)));
  const double c = std::cos(0.3), s = std::sin(0.3);
  EXPECT_NO_THROW(check_slice_stack("/d", stack(30, {c, s, 0}, {0, std::cos(0.2), std::sin(0.2)}, 1.25)));
  EXPECT_NO_THROW(check_slice_stack("/d", stack(1, kRow, kCol, 1)));
  // Positions stored with 3 decimals (rounding of up to 0.0005 mm) are still regular.
  auto rounded = stack(50, kRow, kCol, 0.7);
  for (auto& g : rounded)
    for (double& p : g.position) p = std::round(p * 1000) / 1000;
  EXPECT_NO_THROW(check_slice_stack("/d", rounded));
}

TEST(SliceStack, MissingSliceIsUnevenSpacing) {
  auto s = stack(20, kRow, kCol, 2.0);
  s.erase(s.begin() + 9);
  const std::string msg = test::expect_error_naming([&] { check_slice_stack("/d", s); }, "/d");
  EXPECT_NE(msg.find("uneven slice spacing: 4 mm between IM8.dcm and IM10.dcm, 2 mm elsewhere"), std::string::npos) << msg;
  auto uneven = stack(10, kRow, kCol, 2.0);
  for (int k = 5; k < 10; ++k) uneven[k].position[2] += 0.05;  // one step of 2.05 mm: 2.5% off
  test::expect_error_naming([&] { check_slice_stack("/d", uneven); }, "uneven slice spacing");
}

TEST(SliceStack, GantryTiltIsRefused) {
  // 15 degrees: each slice moves 2 mm along the normal and 2 tan(15°) along a row.
  const auto s = stack(12, kRow, kCol, 2.0, 2.0 * std::tan(15 * 3.14159265358979323846 / 180));
  const std::string msg = test::expect_error_naming([&] { check_slice_stack("/d", s); }, "/d");
  EXPECT_NE(msg.find("sheared by 15.00 degrees (gantry tilt)"), std::string::npos) << msg;
}

TEST(SliceStack, MixedOrientationsAndDuplicatesAreRefused) {
  auto s = stack(8, kRow, kCol, 3.0);
  s[4].orientation = {1, 0, 0, 0, 0, -1};
  test::expect_error_naming([&] { check_slice_stack("/d", s); }, "IM0.dcm and IM4.dcm have different orientations");
  auto d = stack(8, kRow, kCol, 3.0);
  d[5].position = d[4].position;
  test::expect_error_naming([&] { check_slice_stack("/d", d); }, "IM4.dcm and IM5.dcm are at the same position");
}

TEST(SliceStack, ParsesDicomDecimalStrings) {
  SliceGeometry g;
  EXPECT_TRUE(parse_slice_geometry("-125.5\\-98.25\\ 30 ", "1\\0\\0\\0\\1\\0", g));
  EXPECT_EQ(g.position, (Vec3{-125.5, -98.25, 30}));
  EXPECT_FALSE(parse_slice_geometry("1\\2", "1\\0\\0\\0\\1\\0", g));
  EXPECT_FALSE(parse_slice_geometry("1\\2\\x", "1\\0\\0\\0\\1\\0", g));
  EXPECT_FALSE(parse_slice_geometry("1\\2\\3", "1\\0\\0\\0\\1", g));
}

}  // namespace
}  // namespace tessera::io
