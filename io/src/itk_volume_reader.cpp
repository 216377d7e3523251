// Volume files through ITK's ImageIO factories: the IO object tells the
// pixel type and dimensionality first, then a typed reader does the work.
#include <itkGDCMImageIOFactory.h>
#include <itkImageFileReader.h>
#include <itkImageIOFactory.h>
#include <itkMetaImageIOFactory.h>
#include <itkNiftiImageIOFactory.h>
#include <itkNrrdImageIOFactory.h>

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>

#include "itk_util.h"
#include "tessera/io/dicom_series.h"
#include "tessera/io/volume_io.h"

namespace tessera::io {
namespace detail {

void register_itk_io_factories() {
  static std::once_flag once;
  std::call_once(once, [] {
    itk::NiftiImageIOFactory::RegisterOneFactory();
    itk::NrrdImageIOFactory::RegisterOneFactory();
    itk::MetaImageIOFactory::RegisterOneFactory();
    itk::GDCMImageIOFactory::RegisterOneFactory();
  });
}

std::string one_line(const std::string& text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::string describe(const itk::ExceptionObject& e) { return one_line(e.GetDescription()); }

}  // namespace detail

namespace {

namespace fs = std::filesystem;

// Existence, type and emptiness are checked before ITK sees the path so the
// message is about the file, not about a factory that found no reader.
void check_regular_file(const std::string& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw std::runtime_error(path + ": no such file or folder");
  if (!fs::is_regular_file(st)) throw std::runtime_error(path + ": not a regular file");
  if (fs::file_size(path, ec) == 0) throw std::runtime_error(path + ": file is empty");
}

template <class T> Volume read_typed(const std::string& path, itk::ImageIOBase* io) {
  using Reader = itk::ImageFileReader<detail::Image3<T>>;
  auto reader = Reader::New();
  reader->SetFileName(path);
  reader->SetImageIO(io);
  reader->Update();
  return detail::volume_from_itk<T>(reader->GetOutput(), path);
}

Volume read_with_component(const std::string& path, itk::ImageIOBase* io, bool as_float) {
  using C = itk::IOComponentEnum;
  if (as_float) return read_typed<float>(path, io);
  switch (io->GetComponentType()) {
    case C::UCHAR: return read_typed<std::uint8_t>(path, io);
    case C::CHAR: return read_typed<std::int8_t>(path, io);
    case C::USHORT: return read_typed<std::uint16_t>(path, io);
    case C::SHORT: return read_typed<std::int16_t>(path, io);
    case C::UINT: return read_typed<std::uint32_t>(path, io);
    case C::INT: return read_typed<std::int32_t>(path, io);
    case C::FLOAT: return read_typed<float>(path, io);
    case C::DOUBLE:
    // 64-bit integers have no Volume type; double holds them exactly up to 2^53.
    case C::LONG:
    case C::ULONG:
    case C::LONGLONG:
    case C::ULONGLONG: return read_typed<double>(path, io);
    default: break;
  }
  throw std::runtime_error(path + ": unsupported voxel component type " +
                           itk::ImageIOBase::GetComponentTypeAsString(io->GetComponentType()));
}

// ITK reads a cut-off .nii.gz or .nii without complaint (zlib's short read
// is not reported), handing back a volume with zeros at the end. So check
// completeness ourselves: a gzip stream must inflate to its end, and an
// uncompressed NIfTI must hold vox_offset + all voxel bytes.
void check_gzip_complete(const std::string& path) {
  gzFile gz = gzopen(path.c_str(), "rb");
  if (!gz) throw std::runtime_error(path + ": cannot open gzip stream");
  std::vector<char> buf(1 << 20);
  int n = 0;
  while ((n = gzread(gz, buf.data(), static_cast<unsigned>(buf.size()))) > 0) {
  }
  int errnum = Z_OK;
  const char* msg = gzerror(gz, &errnum);
  const std::string why = msg ? msg : "";
  gzclose(gz);
  if (n < 0 || (errnum != Z_OK && errnum != Z_STREAM_END))
    throw std::runtime_error(path + ": truncated or corrupt gzip data (" + why + ")");
}

void check_nifti1_size(const std::string& path) {
  unsigned char h[348];
  std::ifstream in(path, std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(h), sizeof h)) throw std::runtime_error(path + ": truncated NIfTI header");
  std::int32_t sizeof_hdr;
  std::memcpy(&sizeof_hdr, h, 4);
  const bool swap = sizeof_hdr != 348;
  auto get = [&](std::size_t off, std::size_t n, void* out) {
    unsigned char tmp[8];
    std::memcpy(tmp, h + off, n);
    if (swap) std::reverse(tmp, tmp + n);
    std::memcpy(out, tmp, n);
  };
  if (swap) {
    get(0, 4, &sizeof_hdr);
    if (sizeof_hdr != 348) return;  // NIfTI-2 or not NIfTI: leave it to ITK
  }
  std::int16_t dim[8], bitpix;
  for (int i = 0; i < 8; ++i) get(40 + 2 * i, 2, &dim[i]);
  get(72, 2, &bitpix);
  float vox_offset;
  get(108, 4, &vox_offset);
  if (dim[0] < 1 || dim[0] > 7 || bitpix <= 0) return;
  std::uint64_t bytes = static_cast<std::uint64_t>(bitpix) / 8;
  for (int i = 1; i <= dim[0]; ++i) bytes *= static_cast<std::uint64_t>(std::max<std::int16_t>(dim[i], 1));
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  const auto need = static_cast<std::uint64_t>(std::max(352.f, vox_offset)) + bytes;
  if (!ec && size < need)
    throw std::runtime_error(path + ": truncated: the header promises " + std::to_string(need) +
                             " bytes, the file has " + std::to_string(size));
}

void check_complete(const std::string& path, itk::ImageIOBase* io) {
  unsigned char magic[2] = {0, 0};
  std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(magic), 2);
  if (magic[0] == 0x1f && magic[1] == 0x8b) check_gzip_complete(path);
  else if (std::string(io->GetNameOfClass()) == "NiftiImageIO") check_nifti1_size(path);
}

}  // namespace

bool can_read_volume_file(const std::string& path) {
  detail::register_itk_io_factories();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) == 0) return false;
  return itk::ImageIOFactory::CreateImageIO(path.c_str(), itk::IOFileModeEnum::ReadMode) != nullptr;
}

Volume read_volume(const std::string& path, const VolumeReadOptions& options) {
  detail::register_itk_io_factories();
  std::error_code ec;
  if (fs::is_directory(path, ec)) return read_dicom_series(path, options.series_uid, options.as_float);
  check_regular_file(path);
  auto io = itk::ImageIOFactory::CreateImageIO(path.c_str(), itk::IOFileModeEnum::ReadMode);
  if (!io)
    throw std::runtime_error(path +
                             ": not a volume file tessera can read (NIfTI .nii/.nii.gz, NRRD, MetaImage .mha/.mhd, "
                             "DICOM); the header is unrecognised or the extension does not match the content");
  try {
    io->SetFileName(path);
    io->ReadImageInformation();
    const unsigned dims = io->GetNumberOfDimensions();
    if (dims > 3) {
      for (unsigned d = 3; d < dims; ++d)
        if (io->GetDimensions(d) > 1)
          throw std::runtime_error(path + ": is a " + std::to_string(dims) + "D image (" +
                                   std::to_string(io->GetDimensions(d)) + " along axis " + std::to_string(d) +
                                   "); tessera reads 3D volumes, split time points or channels into separate files");
    }
    if (dims < 2) throw std::runtime_error(path + ": is a " + std::to_string(dims) + "D image, not a volume");
    if (io->GetNumberOfComponents() != 1)
      throw std::runtime_error(path + ": has " + std::to_string(io->GetNumberOfComponents()) + " components per voxel (" +
                               itk::ImageIOBase::GetPixelTypeAsString(io->GetPixelType()) +
                               "); tessera reads scalar volumes, give one channel per file");
    // A corrupt header can claim terabytes; check before ITK allocates.
    std::uint64_t voxels = 1;
    for (unsigned d = 0; d < std::min(dims, 3u); ++d) voxels *= io->GetDimensions(d);
    const std::uint64_t bytes = voxels * io->GetComponentSize();
    if (bytes > (std::uint64_t{1} << 35))
      throw std::runtime_error(path + ": header claims " + std::to_string(voxels) +
                               " voxels (over 32 GiB); the header is corrupt or the volume too large");
    // The completeness check inflates the file once more: it runs beside ITK's read, not before it.
    auto complete = std::async(std::launch::async, [&] { check_complete(path, io); });
    Volume v;
    try {
      v = read_with_component(path, io, options.as_float);
    } catch (...) {
      complete.wait();
      complete.get();  // a truncated file's own message wins over ITK's
      throw;
    }
    complete.get();
    v.validate();
    return v;
  } catch (const itk::ExceptionObject& e) {
    throw std::runtime_error(path + ": cannot read volume: " + detail::describe(e));
  }
}

}  // namespace tessera::io
