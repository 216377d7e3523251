#include "tessera/io/file_kind.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "tessera/io/atomic_file.h"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;

enum class Sniff { kUnknown, kGzip, kNifti, kNrrd, kMeta, kDicom, kTiff, kVideo, kOtherImage };

Sniff sniff(const std::string& path) {
  unsigned char b[352] = {0};
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(b), sizeof b);
  const auto n = static_cast<std::size_t>(in.gcount());
  // Magic strings may hold NUL bytes, so their length is given, not strlen'd.
  auto at = [&](std::size_t off, const std::string& magic) {
    const std::size_t len = magic.size();
    return n >= off + len && std::memcmp(b + off, magic.data(), len) == 0;
  };
  if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b) return Sniff::kGzip;
  if (at(344, "n+1") || at(344, "ni1") || at(4, "n+2")) return Sniff::kNifti;
  if (at(0, "NRRD")) return Sniff::kNrrd;
  if (at(0, "ObjectType") || at(0, "NDims")) return Sniff::kMeta;
  if (at(128, "DICM")) return Sniff::kDicom;
  if (at(0, "II*") || at(0, std::string("MM\0*", 4)) || at(0, "II+") || at(0, std::string("MM\0+", 4))) return Sniff::kTiff;
  if (at(4, "ftyp") || at(0, "\x1a\x45\xdf\xa3") || (at(0, "RIFF") && at(8, "AVI ")) || at(0, std::string("\x00\x00\x01\xba", 4)) ||
      at(0, "FLV") || at(0, "OggS"))
    return Sniff::kVideo;
  if (at(0, "\x89PNG") || at(0, "\xff\xd8\xff") || at(0, "BM")) return Sniff::kOtherImage;
  return Sniff::kUnknown;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool one_of(const std::string& ext, std::initializer_list<const char*> list) {
  for (const char* e : list)
    if (ext == e) return true;
  return false;
}

}  // namespace

const char* file_kind_name(FileKind k) {
  switch (k) {
    case FileKind::kVolume: return "volume";
    case FileKind::kDicomFolder: return "dicom-folder";
    case FileKind::kSlide: return "slide";
    case FileKind::kVideo: return "video";
  }
  return "unknown";
}

FileKind detect_file_kind(const std::string& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw std::runtime_error(path + ": no such file or folder");
  if (fs::is_directory(st)) return FileKind::kDicomFolder;
  if (!fs::is_regular_file(st)) throw std::runtime_error(path + ": not a regular file");
  const auto size = fs::file_size(path, ec);
  if (size == 0) throw std::runtime_error(path + ": file is empty");

  const std::string ext = lower(full_extension(path));
  const bool vol_ext = one_of(ext, {".nii", ".nii.gz", ".nrrd", ".nhdr", ".mha", ".mhd", ".dcm", ".hdr", ".img"});
  const bool slide_ext = one_of(ext, {".svs", ".tif", ".tiff", ".ndpi", ".vms", ".vmu", ".scn", ".mrxs", ".svslide",
                                      ".bif", ".qptiff"});
  const bool video_ext = one_of(ext, {".mp4", ".m4v", ".mov", ".avi", ".mkv", ".webm", ".mpg", ".mpeg", ".ts", ".flv",
                                      ".ogv", ".wmv"});
  const Sniff s = sniff(path);
  auto mismatch = [&](const char* content) {
    return std::runtime_error(path + ": content looks like " + std::string(content) + " but the extension is '" + ext +
                              "'; rename the file or check that it is the one you meant");
  };
  switch (s) {
    case Sniff::kNifti:
    case Sniff::kNrrd:
    case Sniff::kMeta:
    case Sniff::kDicom:
      if (slide_ext || video_ext) throw mismatch("a volume (NIfTI/NRRD/MetaImage/DICOM)");
      return FileKind::kVolume;
    case Sniff::kTiff:
      if (vol_ext || video_ext) throw mismatch("a TIFF image");
      return FileKind::kSlide;
    case Sniff::kVideo:
      if (vol_ext || slide_ext) throw mismatch("a video container");
      return FileKind::kVideo;
    case Sniff::kGzip:
      if (ext == ".nii.gz" || ext == ".nrrd" || ext == ".mha") return FileKind::kVolume;
      throw mismatch("gzip-compressed data");
    case Sniff::kOtherImage:
      throw std::runtime_error(path + ": is a 2D picture (PNG/JPEG/BMP), not a volume, slide or video");
    case Sniff::kUnknown: break;
  }
  // No magic we know: MRXS/VMS index files and headerless formats are
  // text; trust the extension and let the reader judge the content.
  if (slide_ext) return FileKind::kSlide;
  if (video_ext) return FileKind::kVideo;
  if (vol_ext) return FileKind::kVolume;
  throw std::runtime_error(path + ": unrecognised file (not a volume, slide or video by content or extension '" + ext +
                           "')");
}

}  // namespace tessera::io
