// Bad input never crashes and always produces a one-line error that names
// the file: missing, empty, truncated, mislabelled and corrupt-header files,
// for each reader. Meant to run under AddressSanitizer too.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "io_test_util.h"
#include "tessera/io/features.h"
#include "tessera/io/file_kind.h"
#include "tessera/io/slide.h"
#include "tessera/io/video.h"
#include "tessera/io/volume_io.h"

namespace tessera::io {
namespace {

// Reads everything a reader offers, so damage anywhere is reached.
void read_volume_fully(const std::string& p) { read_volume(p); }
void read_slide_fully(const std::string& p) {
  const Slide s(p);
  const auto& l = s.info().levels.back();
  s.read_region(0, 0, s.level_count() - 1, l.width, l.height);
  for (const auto& name : s.info().associated) s.read_associated(name);
}
void read_video_fully(const std::string& p) {
  VideoReader r(p);
  VideoFrame f;
  while (r.next(f)) {
  }
}

struct Reader {
  const char* name;
  const char* sample;  // in ../shared/data
  const char* ext;
  bool built;
  std::function<void(const std::string&)> read;
};

std::vector<Reader> readers() {
  const auto b = built_features();
  return {{"volume", "example_ct_sm.nii.gz", ".nii.gz", b.itk, read_volume_fully},
          {"slide", "CMU-1-Small-Region.svs", ".svs", b.openslide, read_slide_fully},
          {"video", "realshort.mp4", ".mp4", b.ffmpeg, read_video_fully}};
}

TEST(BadInput, MissingAndEmptyFiles) {
  test::ScratchDir dir;
  for (const auto& r : readers()) {
    if (!r.built) continue;
    const std::string missing = dir.file(std::string("absent") + r.ext);
    EXPECT_NE(test::expect_error_naming([&] { r.read(missing); }, missing).find("no such file"), std::string::npos)
        << r.name;
    const std::string empty = dir.file(std::string("empty") + r.ext);
    test::write_bytes(empty, "");
    EXPECT_NE(test::expect_error_naming([&] { r.read(empty); }, empty).find("empty"), std::string::npos) << r.name;
  }
}

TEST(BadInput, TruncatedRealFiles) {
  test::ScratchDir dir;
  for (const auto& r : readers()) {
    const std::string src = test::shared_data(r.sample);
    if (!r.built || src.empty()) continue;
    const std::size_t size = test::read_bytes(src).size();
    for (std::size_t keep : {std::size_t{64}, std::size_t{400}, size / 3, size - 100}) {
      const std::string cut = dir.file(std::string("cut_") + std::to_string(keep) + r.ext);
      test::write_truncated_copy(src, cut, keep);
      if (std::string(r.name) == "video") {
        // A cut video may still hold decodable frames before the cut: either a
        // clear error, or frames with the damage skipped. Never a crash.
        try {
          read_video_fully(cut);
        } catch (const std::exception& e) {
          EXPECT_NE(std::string(e.what()).find(cut), std::string::npos) << e.what();
        }
        continue;
      }
      test::expect_error_naming([&] { r.read(cut); }, cut);
    }
  }
}

TEST(BadInput, WrongExtensionForTheContent) {
  test::ScratchDir dir;
  const auto all = readers();
  for (std::size_t i = 0; i < all.size(); ++i) {
    // The next reader's real sample, under this reader's extension.
    const auto& r = all[i];
    const auto& other = all[(i + 1) % all.size()];
    const std::string src = test::shared_data(other.sample);
    if (!r.built || src.empty()) continue;
    const std::string wrong = dir.file(std::string("wrong") + r.ext);
    test::write_bytes(wrong, test::read_bytes(src));
    test::expect_error_naming([&] { r.read(wrong); }, wrong);
    test::expect_error_naming([&] { detect_file_kind(wrong); }, wrong);
  }
}

TEST(BadInput, CorruptHeaders) {
  test::ScratchDir dir;
  for (const auto& r : readers()) {
    const std::string src = test::shared_data(r.sample);
    if (!r.built || src.empty()) continue;
    std::string bytes = test::read_bytes(src);
    // Scramble 64 bytes of the header: the start of a NIfTI or TIFF, the
    // 'moov' index of an MP4 (MP4 readers skip damaged leading atoms).
    std::size_t at = bytes.find("moov");
    at = at == std::string::npos ? 0 : at - 4;
    for (std::size_t i = 0; i < 64; ++i) bytes[at + i] = static_cast<char>(0xA5 ^ (i * 37));
    const std::string bad = dir.file(std::string("header") + r.ext);
    test::write_bytes(bad, bytes);
    test::expect_error_naming([&] { r.read(bad); }, bad);
  }
  // A NIfTI whose header claims far more voxels than the file holds.
  if (built_features().itk) {
    std::string h(352, '\0');
    const std::int32_t sizeof_hdr = 348;
    std::memcpy(&h[0], &sizeof_hdr, 4);
    const std::int16_t dim[8] = {3, 30000, 30000, 30000, 1, 1, 1, 1};
    std::memcpy(&h[40], dim, sizeof dim);
    const std::int16_t dt = 4, bp = 16;
    std::memcpy(&h[70], &dt, 2);
    std::memcpy(&h[72], &bp, 2);
    const float pixdim[4] = {1, 1, 1, 1}, off = 352;
    std::memcpy(&h[76], pixdim, sizeof pixdim);
    std::memcpy(&h[108], &off, 4);
    std::memcpy(&h[344], "n+1", 4);
    const std::string huge = dir.file("huge.nii");
    test::write_bytes(huge, h + std::string(1000, '\0'));
    test::expect_error_naming([&] { read_volume(huge); }, huge);
  }
}

TEST(BadInput, FolderWhereAFileIsExpected) {
  test::ScratchDir dir;
  if (built_features().openslide) test::expect_error_naming([&] { Slide s(dir.path()); }, dir.path());
  if (built_features().ffmpeg) test::expect_error_naming([&] { probe_video(dir.path()); }, dir.path());
}

}  // namespace
}  // namespace tessera::io
