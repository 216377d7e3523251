// When a library was not found at build time its readers and writers still
// exist, so callers link on every machine (the GPU machine has none of the
// optional libraries), but they fail with a message that names the file and
// says what to install. `tessera doctor` reports the same through features.h.
#include <stdexcept>
#include <string>

#include "tessera/io/dicom_seg.h"
#include "tessera/io/dicom_series.h"
#include "tessera/io/features_h5.h"
#include "tessera/io/image_file.h"
#include "tessera/io/pyramid_tiff.h"
#include "tessera/io/samples.h"
#include "tessera/io/slide.h"
#include "tessera/io/video.h"
#include "tessera/io/volume_io.h"

namespace tessera::io {
namespace {

[[noreturn]] void missing(const std::string& path, const char* library) {
  throw std::runtime_error(path + ": this tessera was built without " + library +
                           " (install it and rebuild; `tessera doctor` lists what was built)");
}

}  // namespace

#if !TESSERA_IO_HAS_ITK
Volume read_volume(const std::string& path, const VolumeReadOptions&) { missing(path, "ITK"); }
void write_volume(const std::string& path, const Volume&, bool, int) { missing(path, "ITK"); }
bool can_read_volume_file(const std::string&) { return false; }
std::vector<DicomSeries> list_dicom_series(const std::string& dir) { missing(dir, "ITK"); }
Volume read_dicom_series(const std::string& dir, const std::string&, bool) { missing(dir, "ITK"); }
DicomSeries find_dicom_series(const std::string& dir, const std::string&) { missing(dir, "ITK"); }
void write_dicom_series(const std::string& dir, const Volume&, const std::string&) { missing(dir, "ITK"); }
#endif

#if !TESSERA_IO_HAS_OPENSLIDE
struct Slide::Handle {};
Slide::Slide(const std::string& path, const SlideOpenOptions&) { missing(path, "OpenSlide"); }
Slide::~Slide() = default;
Slide::Slide(Slide&&) noexcept = default;
Slide& Slide::operator=(Slide&&) noexcept = default;
double Slide::level_mpp(int) const { missing(info_.path, "OpenSlide"); }
RgbImage Slide::read_region(std::int64_t, std::int64_t, int, std::int64_t, std::int64_t) const {
  missing(info_.path, "OpenSlide");
}
int Slide::best_level_for_mpp(double) const { missing(info_.path, "OpenSlide"); }
RgbImage Slide::read_associated(const std::string&) const { missing(info_.path, "OpenSlide"); }
#endif

#if !TESSERA_IO_HAS_FFMPEG
bool VideoInfo::has_audio() const {
  for (const auto& s : streams)
    if (s == "audio") return true;
  return false;
}
VideoInfo probe_video(const std::string& path) { missing(path, "FFmpeg"); }
struct VideoReader::State {};
VideoReader::VideoReader(const std::string& path, const VideoReadOptions&) { missing(path, "FFmpeg"); }
VideoReader::~VideoReader() = default;
const VideoInfo& VideoReader::info() const { missing("video", "FFmpeg"); }
bool VideoReader::next(VideoFrame&) { missing("video", "FFmpeg"); }
void VideoReader::seek(double) { missing("video", "FFmpeg"); }
void VideoReader::seek_to_sample(double, std::int64_t) { missing("video", "FFmpeg"); }
struct ParallelVideoReader::State {};
ParallelVideoReader::ParallelVideoReader(const std::string& path, const VideoReadOptions&, int, double) {
  missing(path, "FFmpeg");
}
ParallelVideoReader::~ParallelVideoReader() = default;
const VideoInfo& ParallelVideoReader::info() const { missing("video", "FFmpeg"); }
bool ParallelVideoReader::next(VideoFrame&) { missing("video", "FFmpeg"); }
std::int64_t ParallelVideoReader::corrupt_packets() const { return 0; }
std::int64_t ParallelVideoReader::decoded_frames() const { return 0; }
bool ParallelVideoReader::hardware_decoding() const { return false; }
int ParallelVideoReader::readers() const { return 0; }
std::int64_t VideoReader::corrupt_packets() const { return 0; }
std::int64_t VideoReader::decoded_frames() const { return 0; }
bool VideoReader::hardware_decoding() const { return false; }
struct VideoWriter::State {};
VideoWriter::VideoWriter(const std::string& path, const VideoWriteOptions&) { missing(path, "FFmpeg"); }
VideoWriter::~VideoWriter() = default;
void VideoWriter::add_frame(const RgbImage&, std::int64_t) { missing("video", "FFmpeg"); }
void VideoWriter::finish() { missing("video", "FFmpeg"); }
Table write_sample_video(const std::string& path, const SampleVideoOptions&) { missing(path, "FFmpeg"); }
void repeat_video(const std::string&, const std::string& out, int) { missing(out, "FFmpeg"); }
#endif

#if !TESSERA_IO_HAS_HDF5
void write_patch_features(const std::string& path, const PatchFeatures&) { missing(path, "HDF5"); }
PatchFeatures read_patch_features(const std::string& path) { missing(path, "HDF5"); }
#endif

#if !TESSERA_IO_HAS_TIFF
void write_pyramid_tiff(const std::string& path, const RgbImage&, const PyramidTiffOptions&) { missing(path, "libtiff"); }
#endif

#if !TESSERA_IO_HAS_OPENCV
void write_image(const std::string& path, const RgbImage&) { missing(path, "OpenCV"); }
RgbImage read_image(const std::string& path) { missing(path, "OpenCV"); }
#endif

#if !TESSERA_IO_HAS_DCMTK
DicomSegSummary write_dicom_seg(const std::string& path, const Volume&, const std::string&, const DicomSegOptions&) {
  missing(path, "DCMTK (libdcmtk-dev)");
}
bool dicom_seg_supported() { return false; }
#endif

}  // namespace tessera::io
