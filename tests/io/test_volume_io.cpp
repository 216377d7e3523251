// Volumes through ITK: round trips in every writable format with exact
// geometry, NIfTI header details (endianness, scaling, qform in RAS), the
// real CT in ../shared/data, and refusal of 4D and vector images.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "io_test_util.h"
#include "nifti_bytes.h"
#include "tessera/io/ct_phantom.h"
#include "tessera/io/features.h"
#include "tessera/io/volume_io.h"

namespace tessera::io {
namespace {

using test::ScratchDir;

void expect_geometry_near(const Geometry& a, const Geometry& b, double tol) {
  EXPECT_EQ(a.size, b.size);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(a.spacing[i], b.spacing[i], tol);
    EXPECT_NEAR(a.origin[i], b.origin[i], tol * 100);
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(a.direction[i][j], b.direction[i][j], tol);
  }
}

class VolumeRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(VolumeRoundTrip, GeometryAndVoxelsSurvive) {
  TESSERA_SKIP_WITHOUT(built_features().itk);
  ScratchDir dir;
  const CtPhantom p = make_ct_phantom({{40, 32, 12}, {0.8, 0.7, 2.5}, 12, 15, 7});
  const std::string ext = GetParam();

  // Labels (uint8), CT (int16) and a probability map (float32).
  Volume prob = Volume::zeros(p.ct.geometry, PixelType::kFloat32);
  auto* pr = prob.data<float>();
  for (std::int64_t i = 0; i < prob.geometry.voxel_count(); ++i) pr[i] = static_cast<float>(i % 97) / 96.f;
  for (const Volume* v : std::vector<const Volume*>{&p.labels, &p.ct, &prob}) {
    const std::string first = dir.file(std::string("a_") + pixel_type_name(v->pixel_type) + ext);
    const std::string second = dir.file(std::string("b_") + pixel_type_name(v->pixel_type) + ext);
    write_volume(first, *v);
    const Volume r1 = read_volume(first);
    EXPECT_EQ(r1.pixel_type, v->pixel_type) << first;
    EXPECT_EQ(r1.bytes, v->bytes) << first;
    // From memory (double) to file, NIfTI keeps float32 geometry: near.
    expect_geometry_near(r1.geometry, v->geometry, 1e-5);
    // Read -> write -> read: identical size, spacing, origin and voxels, bit
    // for bit. The oblique direction matrix comes back to within the
    // format's storage: NIfTI keeps it as float32 (qform quaternion/sform),
    // NRRD and MetaImage as decimal text (one ulp; NRRD stores spacing times
    // direction, so spacing also comes back to the last bit or so).
    write_volume(second, r1);
    const Volume r2 = read_volume(second);
    EXPECT_EQ(r2.geometry.size, r1.geometry.size) << second;
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(r2.geometry.spacing[i], r1.geometry.spacing[i], 1e-14) << second;
      EXPECT_NEAR(r2.geometry.origin[i], r1.geometry.origin[i], 1e-12) << second;
    }
    const double dir_tol = ext.rfind(".nii", 0) == 0 ? 1e-7 : 1e-15;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) EXPECT_NEAR(r2.geometry.direction[i][j], r1.geometry.direction[i][j], dir_tol) << second;
    EXPECT_EQ(r2.bytes, r1.bytes) << second;
    EXPECT_EQ(r2.pixel_type, r1.pixel_type);
  }
  // No temp files left beside the outputs.
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

// A .nii.gz larger than one of the parallel gzip's blocks: several threads deflate it, zlib must
// inflate it as one member with a matching CRC and size (the reader's completeness check verifies both).
TEST(VolumeIo, LargeGzipNiftiIsOneValidStreamWrittenByThreads) {
  TESSERA_SKIP_WITHOUT(built_features().itk);
  ScratchDir dir;
  Geometry g;
  g.size = {160, 150, 61};
  g.spacing = {0.7, 0.8, 2.0};
  Volume v = Volume::zeros(g, PixelType::kFloat32);
  auto* p = v.data<float>();
  std::uint32_t x = 12345;
  for (std::int64_t i = 0; i < g.voxel_count(); ++i) {
    x = x * 1664525u + 1013904223u;  // incompressible enough that every block carries data
    p[i] = (i % 3 == 0) ? static_cast<float>(x >> 8) : static_cast<float>(i / 4096);
  }
  const std::string path = dir.file("big.nii.gz");
  ASSERT_GT(v.bytes.size(), size_t{4} << 20);  // several of the writer's 1 MiB blocks
  write_volume(path, v);
  const Volume r = read_volume(path);
  EXPECT_EQ(r.geometry.size, g.size);
  EXPECT_EQ(r.bytes, v.bytes);
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"big.nii.gz"});
}

// A label map at the fastest level: read back the same, larger than at level 6 but still a fraction of the voxels;
// a level outside zlib's range is refused, naming the file, with nothing written.
TEST(VolumeIo, GzipLevelOneLabelMapRoundTripsAndBadLevelsAreRefused) {
  TESSERA_SKIP_WITHOUT(built_features().itk);
  ScratchDir dir;
  Geometry g;
  g.size = {200, 180, 40};
  Volume v = Volume::zeros(g, PixelType::kUInt8);
  auto* p = v.data<std::uint8_t>();
  for (std::int64_t i = 0; i < g.voxel_count(); ++i) {
    const std::int64_t x = i % 200, y = (i / 200) % 180, z = i / (200 * 180);
    p[i] = static_cast<std::uint8_t>(((x - 100) * (x - 100) + (y - 90) * (y - 90) < (40 + z) * (40 + z)) ? 1 + (x + z) / 50 : 0);
  }
  const std::string fast = dir.file("fast.nii.gz"), usual = dir.file("usual.nii.gz");
  write_volume(fast, v, true, 1);
  write_volume(usual, v);
  EXPECT_EQ(read_volume(fast).bytes, v.bytes);
  EXPECT_LT(std::filesystem::file_size(fast), v.bytes.size() / 10);
  EXPECT_GE(std::filesystem::file_size(fast), std::filesystem::file_size(usual));
  for (const int bad : {0, 10}) {
    const std::string path = dir.file("bad" + std::to_string(bad) + ".nii.gz");
    test::expect_error_naming([&] { write_volume(path, v, true, bad); }, path);
    EXPECT_FALSE(std::filesystem::exists(path));
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, VolumeRoundTrip, ::testing::Values(".nii", ".nii.gz", ".nrrd", ".mha"),
                         [](const auto& info) {
                           std::string s = info.param.substr(1);
                           for (auto& c : s)
                             if (c == '.') c = '_';
                           return s;
                         });

TEST(VolumeIo, NiftiQformIsRasAndItkGivesLps) {
  TESSERA_SKIP_WITHOUT(built_features().itk);
  ScratchDir dir;
  test::NiftiSpec spec;
  std::vector<std::int16_t> vox(4 * 3 * 2);
  for (std::size_t i = 0; i < vox.size(); ++i) vox[i] = static_cast<std::int16_t>(i * 10 - 50);
  const std::string path = dir.file("q.nii");
  test::write_bytes(path, test::make_nifti_int16(spec, vox));
  const Volume v = read_volume(path);
  EXPECT_EQ(v.pixel_type, PixelType::kInt16);
  EXPECT_EQ(v.geometry.size, (std::array<std::int64_t, 3>{4, 3, 2}));
  EXPECT_DOUBLE_EQ(v.geometry.spacing[0], 1.5);
  EXPECT_DOUBLE_EQ(v.geometry.spacing[2], 3.0);
  // NIfTI identity rotation in RAS is diag(-1,-1,1) in ITK's LPS; the RAS
  // offset (10,20,30) becomes the LPS origin (-10,-20,30).
  EXPECT_DOUBLE_EQ(v.geometry.direction[0][0], -1);
  EXPECT_DOUBLE_EQ(v.geometry.direction[1][1], -1);
  EXPECT_DOUBLE_EQ(v.geometry.direction[2][2], 1);
  EXPECT_DOUBLE_EQ(v.geometry.origin[0], -10);
  EXPECT_DOUBLE_EQ(v.geometry.origin[1], -20);
  EXPECT_DOUBLE_EQ(v.geometry.origin[2], 30);
  EXPECT_EQ(v.data<std::int16_t>()[5], 0);
}

TEST(VolumeIo, NiftiSformGivesObliqueDirectionAndSpacing) {
  TESSERA_SKIP_WITHOUT(built_features().itk);
  test::ScratchDir dir;
  // RAS affine: rotation by 30 degrees about S, spacing (2, 3, 4), offset (5, 6, 7).
  const double c30 = std::cos(M_PI / 6), s30 = std::sin(M_PI / 6);
  test::NiftiSpec spec;
  spec.use_sform = true;
  spec.pixdim = {2.f, 3.f, 4.f};
  spec.srow = {{{static_cast<float>(2 * c30), static_cast<float>(-3 * s30), 0.f, 5.f},
                {static_cast<float>(2 * s30), static_cast<float>(3 * c30), 0.f, 6.f},
                {0.f, 0.f, 4.f, 7.f}}};
  const std::string path = dir.file("sform.nii");
  test::write_bytes(path, test::make_nifti_int16(spec, std::vector<std::int16_t>(24, 3)));
  const Volume v = read_volume(path);
  EXPECT_NEAR(v.geometry.spacing[0], 2, 1e-5);
  EXPECT_NEAR(v.geometry.spacing[1], 3, 1e-5);
  EXPECT_NEAR(v.geometry.spacing[2], 4, 1e-5);
  // RAS -> LPS negates the first two rows.
  EXPECT_NEAR(v.geometry.direction[0][0], -c30, 1e-6);
  EXPECT_NEAR(v.geometry.direction[0][1], s30, 1e-6);
  EXPECT_NEAR(v.geometry.direction[1][0], -s30, 1e-6);
  EXPECT_NEAR(v.geometry.direction[1][1], -c30, 1e-6);
  EXPECT_NEAR(v.geometry.direction[2][2], 1, 1e-6);
  EXPECT_NEAR(v.geometry.origin[0], -5, 1e-5);
  EXPECT_NEAR(v.geometry.origin[1], -6, 1e-5);
  EXPECT_NEAR(v.geometry.origin[2], 7, 1e-5);
}

TEST(VolumeIo, NiftiBigEndianReadsTheSameVoxels) {
  TESSERA_SKIP_WITHOUT(built_features().itk);
  ScratchDir dir;
  std::vector<std::int16_t> vox(4 * 3 * 2);
  for (std::size_t i = 0; i < vox.size(); ++i) vox[i] = static_cast<std::int16_t>(1000 - 77 * i);
  test::NiftiSpec little, big;
  big.big_endian = true;
  test::write_bytes(dir.file("le.nii"), test::make_nifti_int16(little, vox));
  test::write_bytes(dir.file("be.nii"), test::make_nifti_int16(big, vox));
  const Volume a = read_volume(dir.file("le.nii")), b = read_volume(dir.file("be.nii"));
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.geometry, b.geometry);
  EXPECT_EQ(b.data<std::int16_t>()[3], 1000 - 77 * 3);
}

TEST(VolumeIo, NiftiSlopeAndInterceptAreApplied) {
  TESSERA_SKIP_WITHOUT(built_features().itk);
  ScratchDir dir;
  test::NiftiSpec spec;
  spec.scl_slope = 0.5f;
  spec.scl_inter = -1024.f;
  std::vector<std::int16_t> vox(4 * 3 * 2);
  for (std::size_t i = 0; i < vox.size(); ++i) vox[i] = static_cast<std::int16_t>(100 * i + 1);
  test::write_bytes(dir.file("s.nii"), test::make_nifti_int16(spec, vox));
  const Volume v = read_volume(dir.file("s.nii"));
  EXPECT_EQ(v.pixel_type, PixelType::kFloat32);  // ITK turns scaled integers into float
  const std::vector<float> f = v.to_float();
  for (std::size_t i = 0; i < vox.size(); ++i) EXPECT_FLOAT_EQ(f[i], 0.5f * vox[i] - 1024.f) << i;
  // Unscaled integers keep their type unless float is asked for.
  test::write_bytes(dir.file("u.nii"), test::make_nifti_int16(test::NiftiSpec{}, vox));
  EXPECT_EQ(read_volume(dir.file("u.nii")).pixel_type, PixelType::kInt16);
  VolumeReadOptions as_float;
  as_float.as_float = true;
  const Volume fv = read_volume(dir.file("u.nii"), as_float);
  EXPECT_EQ(fv.pixel_type, PixelType::kFloat32);
  EXPECT_FLOAT_EQ(fv.data<float>()[7], static_cast<float>(vox[7]));
}

TEST(VolumeIo, FourDimensionalImageIsRefusedNamingTheFile) {
  TESSERA_SKIP_WITHOUT(built_features().itk);
  ScratchDir dir;
  test::NiftiSpec spec;
  spec.dim = {4, 4, 3, 2, 5, 1, 1, 1};
  const std::string path = dir.file("fmri.nii");
  test::write_bytes(path, test::make_nifti_int16(spec, std::vector<std::int16_t>(4 * 3 * 2 * 5, 1)));
  const std::string msg = test::expect_error_naming([&] { read_volume(path); }, path);
  EXPECT_NE(msg.find("4D"), std::string::npos) << msg;
}

TEST(VolumeIo, VectorImageIsRefusedNamingTheFile) {
  TESSERA_SKIP_WITHOUT(built_features().itk);
  ScratchDir dir;
  test::NiftiSpec spec;
  spec.dim = {5, 4, 3, 2, 1, 3, 1, 1};
  spec.intent_code = 1007;  // NIFTI_INTENT_VECTOR
  const std::string path = dir.file("field.nii");
  test::write_bytes(path, test::make_nifti_int16(spec, std::vector<std::int16_t>(4 * 3 * 2 * 3, 1)));
  const std::string msg = test::expect_error_naming([&] { read_volume(path); }, path);
  EXPECT_NE(msg.find("components"), std::string::npos) << msg;
}

TEST(VolumeIo, WriterRefusesTwoFileFormatsAndUnknownExtensions) {
  TESSERA_SKIP_WITHOUT(built_features().itk);
  ScratchDir dir;
  const CtPhantom p = make_ct_phantom({{8, 8, 4}, {1, 1, 1}, 0, 0, 1});
  test::expect_error_naming([&] { write_volume(dir.file("x.mhd"), p.ct); }, dir.file("x.mhd"));
  test::expect_error_naming([&] { write_volume(dir.file("x.png"), p.ct); }, dir.file("x.png"));
  Volume broken = p.ct;
  broken.bytes.resize(3);
  test::expect_error_naming([&] { write_volume(dir.file("x.nii.gz"), broken); }, dir.file("x.nii.gz"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.nii.gz")));
}

TEST(VolumeIo, RealCtHasThreeMillimetreSpacingAndHounsfieldRange) {
  TESSERA_SKIP_WITHOUT(built_features().itk);
  const std::string path = test::shared_data("example_ct_sm.nii.gz");
  if (path.empty()) GTEST_SKIP() << "../shared/data/example_ct_sm.nii.gz absent";
  const Volume v = read_volume(path);
  EXPECT_EQ(v.pixel_type, PixelType::kInt16);
  EXPECT_EQ(v.geometry.size, (std::array<std::int64_t, 3>{122, 101, 30}));
  for (int a = 0; a < 3; ++a) EXPECT_NEAR(v.geometry.spacing[a], 3.0, 1e-6);
  const auto [lo, hi] = v.value_range();
  // Air at about -1024 HU, bone well above +500 HU in an abdominal CT.
  EXPECT_LE(lo, -1000);
  EXPECT_GE(lo, -3024);
  EXPECT_GE(hi, 500);
  EXPECT_LE(hi, 4095);
  // Read -> write -> read keeps everything bit for bit, compressed or not.
  ScratchDir dir;
  for (const char* name : {"ct.nii.gz", "ct.nrrd", "ct.mha"}) {
    write_volume(dir.file(name), v);
    const Volume r = read_volume(dir.file(name));
    EXPECT_EQ(r.geometry, v.geometry) << name;
    EXPECT_EQ(r.bytes, v.bytes) << name;
  }
}

}  // namespace
}  // namespace tessera::io
