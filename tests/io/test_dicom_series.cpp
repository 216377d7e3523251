// DICOM folders: written slice by slice with GDCM, read back in position
// order with the same oblique geometry; several series must be chosen.
#include <gtest/gtest.h>

#include <filesystem>

#include "io_test_util.h"
#include "tessera/io/ct_phantom.h"
#include "tessera/io/dicom_series.h"
#include "tessera/io/features.h"
#include "tessera/io/volume_io.h"

namespace tessera::io {
namespace {

void expect_geometry_near(const Geometry& a, const Geometry& b) {
  EXPECT_EQ(a.size, b.size);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(a.spacing[i], b.spacing[i], 1e-6);
    EXPECT_NEAR(a.origin[i], b.origin[i], 1e-5);
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(a.direction[i][j], b.direction[i][j], 1e-6);
  }
}

TEST(DicomSeries, ObliqueSeriesRoundTrips) {
  TESSERA_SKIP_WITHOUT(built_features().itk);
  test::ScratchDir dir;
  const CtPhantom p = make_ct_phantom({{24, 20, 7}, {0.75, 0.75, 2.5}, 12, 15, 9});
  write_dicom_series(dir.file("series"), p.ct, "phantom");
  const auto list = list_dicom_series(dir.file("series"));
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].files.size(), 7u);
  EXPECT_EQ(list[0].description, "phantom");
  EXPECT_EQ(list[0].modality, "CT");
  const Volume v = read_volume(dir.file("series"));  // a folder goes to the DICOM reader
  EXPECT_EQ(v.pixel_type, PixelType::kInt16);
  expect_geometry_near(v.geometry, p.ct.geometry);
  EXPECT_EQ(v.bytes, p.ct.bytes);
}

TEST(DicomSeries, SeveralSeriesMustBeChosenByUid) {
  TESSERA_SKIP_WITHOUT(built_features().itk);
  test::ScratchDir dir;
  const CtPhantom a = make_ct_phantom({{16, 16, 4}, {1, 1, 2}, 0, 5, 1});
  const CtPhantom b = make_ct_phantom({{16, 16, 5}, {1, 1, 3}, 0, 5, 2});
  write_dicom_series(dir.file("a"), a.ct, "first");
  write_dicom_series(dir.file("b"), b.ct, "second");
  // Put both series in one folder.
  const std::string mixed = dir.file("mixed");
  std::filesystem::create_directories(mixed);
  for (const char* s : {"a", "b"})
    for (const auto& e : std::filesystem::directory_iterator(dir.file(s)))
      std::filesystem::copy_file(e.path(), mixed + "/" + s + "_" + e.path().filename().string());
  const auto list = list_dicom_series(mixed);
  ASSERT_EQ(list.size(), 2u);
  const std::string msg = test::expect_error_naming([&] { read_volume(mixed); }, mixed);
  EXPECT_NE(msg.find(list[0].uid), std::string::npos) << msg;
  EXPECT_NE(msg.find(list[1].uid), std::string::npos) << msg;
  for (const auto& s : list) {
    VolumeReadOptions opt;
    opt.series_uid = s.uid;
    const Volume v = read_volume(mixed, opt);
    EXPECT_EQ(v.geometry.size[2], static_cast<std::int64_t>(s.files.size()));
    EXPECT_EQ(v.bytes, (s.description == "first" ? a : b).ct.bytes) << s.description;
  }
  VolumeReadOptions nope;
  nope.series_uid = "9.9.9";
  test::expect_error_naming([&] { read_volume(mixed, nope); }, mixed);
}

TEST(DicomSeries, FolderWithoutDicomSaysSo) {
  TESSERA_SKIP_WITHOUT(built_features().itk);
  test::ScratchDir dir;
  test::write_bytes(dir.file("notes.txt"), "not dicom\n");
  const std::string msg = test::expect_error_naming([&] { read_volume(dir.path()); }, dir.path());
  EXPECT_NE(msg.find("no DICOM"), std::string::npos) << msg;
}

}  // namespace
}  // namespace tessera::io
