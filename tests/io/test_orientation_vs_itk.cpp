// Our reorientation moves voxels by hand (any pixel type, exact inverse);
// check it does what ITK's OrientImageFilter does. ITK names orientations
// by where each axis comes *from*, so our points-to "RAS" is ITK's "LPI".
#include <gtest/gtest.h>

#include <itkImage.h>
#include <itkOrientImageFilter.h>

#include <cstring>

#include "tessera/io/ct_phantom.h"
#include "tessera/io/orientation.h"

namespace tessera::io {
namespace {

using Image = itk::Image<std::int16_t, 3>;

Image::Pointer to_itk(const Volume& v) {
  auto img = Image::New();
  Image::RegionType region;
  Image::SpacingType spacing;
  Image::PointType origin;
  Image::DirectionType dir;
  for (unsigned a = 0; a < 3; ++a) {
    region.SetSize(a, static_cast<itk::SizeValueType>(v.geometry.size[a]));
    spacing[a] = v.geometry.spacing[a];
    origin[a] = v.geometry.origin[a];
    for (unsigned c = 0; c < 3; ++c) dir[a][c] = v.geometry.direction[a][c];
  }
  img->SetRegions(region);
  img->SetSpacing(spacing);
  img->SetOrigin(origin);
  img->SetDirection(dir);
  img->Allocate();
  std::memcpy(img->GetBufferPointer(), v.bytes.data(), v.bytes.size());
  return img;
}

void expect_same_as_itk(const Volume& v) {
  auto filter = itk::OrientImageFilter<Image, Image>::New();
  filter->UseImageDirectionOn();
  filter->SetDesiredCoordinateOrientation(itk::SpatialOrientation::ITK_COORDINATE_ORIENTATION_LPI);
  filter->SetInput(to_itk(v));
  filter->Update();
  const Image* ref = filter->GetOutput();
  const Volume ours = reorient_to_ras(v);
  for (unsigned a = 0; a < 3; ++a) {
    EXPECT_EQ(ours.geometry.size[a], static_cast<std::int64_t>(ref->GetLargestPossibleRegion().GetSize()[a]));
    EXPECT_NEAR(ours.geometry.spacing[a], ref->GetSpacing()[a], 1e-12);
    EXPECT_NEAR(ours.geometry.origin[a], ref->GetOrigin()[a], 1e-9);
    for (unsigned c = 0; c < 3; ++c) EXPECT_NEAR(ours.geometry.direction[a][c], ref->GetDirection()[a][c], 1e-12);
  }
  ASSERT_EQ(ours.bytes.size(), ref->GetLargestPossibleRegion().GetNumberOfPixels() * sizeof(std::int16_t));
  EXPECT_EQ(std::memcmp(ours.bytes.data(), ref->GetBufferPointer(), ours.bytes.size()), 0);
}

TEST(OrientationVsItk, ObliquePhantomMatchesOrientImageFilter) {
  expect_same_as_itk(make_ct_phantom({{20, 14, 6}, {0.9, 0.8, 2.5}, 12, 15, 5}).ct);
}

TEST(OrientationVsItk, PermutedAndFlippedAxesMatchOrientImageFilter) {
  Volume v = make_ct_phantom({{9, 7, 5}, {1, 2, 3}, 0, 15, 6}).ct;
  v.geometry.direction = {{{0, 0, -1}, {-1, 0, 0}, {0, 1, 0}}};
  ASSERT_EQ(orientation_code(v.geometry.direction), "ASR");
  expect_same_as_itk(v);
  v.geometry.direction = {{{0, 1, 0}, {0, 0, -1}, {-1, 0, 0}}};
  ASSERT_EQ(orientation_code(v.geometry.direction), "ILA");
  expect_same_as_itk(v);
}

}  // namespace
}  // namespace tessera::io
