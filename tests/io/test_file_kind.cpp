// Content sniffing decides the reader; extension contradicting content is an error.
#include <gtest/gtest.h>

#include "io_test_util.h"
#include "tessera/io/file_kind.h"

namespace tessera::io {
namespace {

TEST(FileKind, RealSamplesAreRecognised) {
  const std::string svs = test::shared_data("CMU-1-Small-Region.svs");
  const std::string nii = test::shared_data("example_ct_sm.nii.gz");
  const std::string mp4 = test::shared_data("realshort.mp4");
  if (svs.empty() || nii.empty() || mp4.empty()) GTEST_SKIP() << "../shared/data absent";
  EXPECT_EQ(detect_file_kind(svs), FileKind::kSlide);
  EXPECT_EQ(detect_file_kind(nii), FileKind::kVolume);
  EXPECT_EQ(detect_file_kind(mp4), FileKind::kVideo);
}

TEST(FileKind, FoldersAreDicomAndContentBeatsExtension) {
  test::ScratchDir dir;
  EXPECT_EQ(detect_file_kind(dir.path()), FileKind::kDicomFolder);
  test::write_bytes(dir.file("a.nrrd"), "NRRD0004\ntype: short\n");
  EXPECT_EQ(detect_file_kind(dir.file("a.nrrd")), FileKind::kVolume);
  // A TIFF named .nii.gz, an MP4 named .svs, a PNG named .mp4.
  test::write_bytes(dir.file("t.nii.gz"), std::string("II*\0\x08\0\0\0", 8) + std::string(64, 'x'));
  test::expect_error_naming([&] { detect_file_kind(dir.file("t.nii.gz")); }, dir.file("t.nii.gz"));
  test::write_bytes(dir.file("v.svs"), std::string("\0\0\0\x20" "ftypisom", 12) + std::string(64, 'x'));
  test::expect_error_naming([&] { detect_file_kind(dir.file("v.svs")); }, dir.file("v.svs"));
  test::write_bytes(dir.file("p.mp4"), std::string("\x89PNG\r\n\x1a\n") + std::string(64, 'x'));
  test::expect_error_naming([&] { detect_file_kind(dir.file("p.mp4")); }, dir.file("p.mp4"));
  test::write_bytes(dir.file("notes.txt"), "hello");
  test::expect_error_naming([&] { detect_file_kind(dir.file("notes.txt")); }, dir.file("notes.txt"));
  test::write_bytes(dir.file("empty.mp4"), "");
  test::expect_error_naming([&] { detect_file_kind(dir.file("empty.mp4")); }, dir.file("empty.mp4"));
  test::expect_error_naming([&] { detect_file_kind(dir.file("absent.nii")); }, dir.file("absent.nii"));
}

}  // namespace
}  // namespace tessera::io
