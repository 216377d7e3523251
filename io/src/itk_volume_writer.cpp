// Writing label and probability maps with the exact source geometry. The IO
// object is chosen from the final name's extension and handed the temp file.
#include <itkImageFileWriter.h>
#include <itkMetaImageIO.h>
#include <itkNiftiImageIO.h>
#include <itkNrrdImageIO.h>

#include <cstdio>

#include "gzip_parallel.h"
#include "itk_util.h"
#include "tessera/io/atomic_file.h"
#include "tessera/io/volume_io.h"

namespace tessera::io {
namespace {

itk::ImageIOBase::Pointer io_for_extension(const std::string& path) {
  const std::string ext = full_extension(path);
  if (ext == ".nii" || ext == ".nii.gz") return itk::NiftiImageIO::New().GetPointer();
  if (ext == ".nrrd") return itk::NrrdImageIO::New().GetPointer();
  if (ext == ".mha") return itk::MetaImageIO::New().GetPointer();
  if (ext == ".mhd" || ext == ".nhdr" || ext == ".hdr")
    throw std::runtime_error(path + ": " + ext +
                             " keeps voxels in a second file, which cannot be written atomically; use .mha, .nrrd or "
                             ".nii.gz");
  throw std::runtime_error(path + ": unknown volume extension '" + ext + "' (use .nii, .nii.gz, .nrrd or .mha)");
}

template <class T> void write_typed(const std::string& tmp, const Volume& v, itk::ImageIOBase* io, bool compress) {
  auto img = detail::itk_from_volume<T>(v);
  auto writer = itk::ImageFileWriter<detail::Image3<T>>::New();
  writer->SetFileName(tmp);
  writer->SetImageIO(io);
  writer->SetInput(img);
  writer->SetUseCompression(compress);
  writer->Update();
}

}  // namespace

void write_volume(const std::string& path, const Volume& v, bool compress, int gzip_level) {
  detail::register_itk_io_factories();
  if (gzip_level < 1 || gzip_level > 9)
    throw std::invalid_argument(path + ": gzip level must be 1 to 9, got " + std::to_string(gzip_level));
  try {
    v.validate();
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": refusing to write an invalid volume: " + e.what());
  }
  auto io = io_for_extension(path);
  // A plain .nii is never compressed; everything else follows `compress`.
  const bool gz = compress && full_extension(path) != ".nii";
  // ITK deflates NIfTI on one thread, slow for a CT-sized map: it writes a plain .nii, which several
  // threads then gzip. NRRD and MetaImage compress their voxel block themselves.
  const bool gzip_after = gz && full_extension(path) == ".nii.gz";
  write_atomically_keeping_extension(path, [&](const std::string& tmp) {
    const std::string itk_path = gzip_after ? tmp.substr(0, tmp.size() - 3) : tmp;
    struct RemovePlain {  // the intermediate .nii goes whatever happens
      const std::string* p;
      ~RemovePlain() { if (p) std::remove(p->c_str()); }
    } remove_plain{gzip_after ? &itk_path : nullptr};
    try {
      visit_pixels(v, [&](const auto* p) {
        using T = std::remove_const_t<std::remove_pointer_t<decltype(p)>>;
        write_typed<T>(itk_path, v, io, gz && !gzip_after);
      });
    } catch (const itk::ExceptionObject& e) {
      throw std::runtime_error(path + ": cannot write volume: " + detail::describe(e));
    }
    if (gzip_after) detail::gzip_file_parallel(itk_path, tmp, gzip_level);
  });
}

}  // namespace tessera::io
