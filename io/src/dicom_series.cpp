// DICOM folders through GDCM as ITK wraps it: GDCMSeriesFileNames groups the
// files into series and orders them by position; ImageSeriesReader stacks them.
#include <itkGDCMImageIO.h>
#include <itkGDCMSeriesFileNames.h>
#include <itkImageSeriesReader.h>
#include <itkImageSeriesWriter.h>
#include <itkMetaDataObject.h>
#include <itkNumericSeriesFileNames.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <limits>
#include <sstream>

#include "itk_util.h"
#include "tessera/io/dicom_series.h"
#include "tessera/io/slice_stack.h"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;

std::string tag_value(itk::GDCMImageIO* io, const std::string& tag) {
  std::string value;
  io->GetValueFromTag(tag, value);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\0')) value.pop_back();
  return value;
}

template <class T> Volume read_series_typed(const std::string& dir, const std::vector<std::string>& files) {
  auto reader = itk::ImageSeriesReader<detail::Image3<T>>::New();
  reader->SetImageIO(itk::GDCMImageIO::New());
  reader->SetFileNames(files);
  // check_slice_stack below says what is wrong in one line; ITK's own warning would be a second.
  reader->SetSpacingWarningRelThreshold(std::numeric_limits<double>::infinity());
  reader->Update();
  // The per-slice tags, to refuse stacks that ITK would turn into a volume with the wrong geometry.
  const auto* dicts = reader->GetMetaDataDictionaryArray();
  std::vector<SliceGeometry> slices;
  for (size_t k = 0; dicts && k < dicts->size() && k < files.size(); ++k) {
    std::string position, orientation;
    SliceGeometry g;
    g.file = files[k];
    if (!itk::ExposeMetaData<std::string>(*(*dicts)[k], "0020|0032", position) ||
        !itk::ExposeMetaData<std::string>(*(*dicts)[k], "0020|0037", orientation) ||
        !parse_slice_geometry(position, orientation, g))
      break;
    slices.push_back(g);
  }
  if (slices.size() == files.size()) check_slice_stack(dir, slices);
  return detail::volume_from_itk<T>(reader->GetOutput(), dir);
}

}  // namespace

std::vector<DicomSeries> list_dicom_series(const std::string& dir) {
  detail::register_itk_io_factories();
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw std::runtime_error(dir + ": no such file or folder");
  if (!fs::is_directory(dir, ec)) throw std::runtime_error(dir + ": not a folder");
  std::vector<DicomSeries> out;
  try {
    auto names = itk::GDCMSeriesFileNames::New();
    names->SetUseSeriesDetails(true);
    names->SetDirectory(dir);
    for (const auto& uid : names->GetSeriesUIDs()) {
      DicomSeries s;
      s.uid = uid;
      s.files = names->GetFileNames(uid);
      if (!s.files.empty()) {
        auto io = itk::GDCMImageIO::New();
        io->SetFileName(s.files.front());
        io->ReadImageInformation();
        s.description = tag_value(io, "0008|103e");
        s.modality = tag_value(io, "0008|0060");
      }
      out.push_back(std::move(s));
    }
  } catch (const itk::ExceptionObject& e) {
    throw std::runtime_error(dir + ": cannot scan for DICOM series: " + detail::describe(e));
  }
  return out;
}

DicomSeries find_dicom_series(const std::string& dir, const std::string& uid) {
  const auto all = list_dicom_series(dir);
  if (all.empty()) throw std::runtime_error(dir + ": folder holds no DICOM series");
  const DicomSeries* pick = nullptr;
  if (uid.empty()) {
    if (all.size() > 1) {
      std::string msg = dir + ": folder holds " + std::to_string(all.size()) + " DICOM series, choose one:";
      for (const auto& s : all) msg += " " + s.uid + " (" + std::to_string(s.files.size()) + " files)";
      throw std::runtime_error(msg);
    }
    pick = &all.front();
  } else {
    for (const auto& s : all)
      if (s.uid == uid || s.uid.compare(0, uid.size(), uid) == 0) {
        if (pick) throw std::runtime_error(dir + ": series id '" + uid + "' matches more than one series");
        pick = &s;
      }
    if (!pick) {
      std::string msg = dir + ": no DICOM series '" + uid + "'; found:";
      for (const auto& s : all) msg += " " + s.uid;
      throw std::runtime_error(msg);
    }
  }
  return *pick;
}

Volume read_dicom_series(const std::string& dir, const std::string& uid, bool as_float) {
  const DicomSeries series = find_dicom_series(dir, uid);
  const DicomSeries* pick = &series;
  try {
    auto io = itk::GDCMImageIO::New();
    io->SetFileName(pick->files.front());
    io->ReadImageInformation();
    if (io->GetNumberOfComponents() != 1)
      throw std::runtime_error(dir + ": series " + pick->uid + " has " + std::to_string(io->GetNumberOfComponents()) +
                               " components per pixel; tessera reads scalar volumes");
    using C = itk::IOComponentEnum;
    Volume v;
    if (as_float) v = read_series_typed<float>(dir, pick->files);
    else switch (io->GetComponentType()) {
        case C::UCHAR: v = read_series_typed<std::uint8_t>(dir, pick->files); break;
        case C::CHAR: v = read_series_typed<std::int8_t>(dir, pick->files); break;
        case C::USHORT: v = read_series_typed<std::uint16_t>(dir, pick->files); break;
        case C::SHORT: v = read_series_typed<std::int16_t>(dir, pick->files); break;
        case C::UINT: v = read_series_typed<std::uint32_t>(dir, pick->files); break;
        case C::INT: v = read_series_typed<std::int32_t>(dir, pick->files); break;
        case C::FLOAT: v = read_series_typed<float>(dir, pick->files); break;
        default: v = read_series_typed<double>(dir, pick->files); break;
      }
    v.validate();
    return v;
  } catch (const itk::ExceptionObject& e) {
    throw std::runtime_error(dir + ": cannot read DICOM series " + pick->uid + ": " + detail::describe(e));
  }
}

namespace {

std::string fmt_double(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", x);
  return buf;
}

template <class T> void write_series_typed(const std::string& dir, const Volume& v, const std::string& description) {
  using Image2 = itk::Image<T, 2>;
  auto img = detail::itk_from_volume<T>(v);
  auto io = itk::GDCMImageIO::New();
  const auto& g = v.geometry;
  std::ostringstream orient;
  // ImageOrientationPatient: the row (index i) and column (index j) directions, LPS.
  orient << fmt_double(g.direction[0][0]) << "\\" << fmt_double(g.direction[1][0]) << "\\"
         << fmt_double(g.direction[2][0]) << "\\" << fmt_double(g.direction[0][1]) << "\\"
         << fmt_double(g.direction[1][1]) << "\\" << fmt_double(g.direction[2][1]);
  std::vector<itk::MetaDataDictionary> dicts(static_cast<std::size_t>(g.size[2]));
  std::vector<std::string> files;
  for (std::int64_t k = 0; k < g.size[2]; ++k) {
    auto& d = dicts[static_cast<std::size_t>(k)];
    auto set = [&d](const char* tag, const std::string& value) { itk::EncapsulateMetaData<std::string>(d, tag, value); };
    const Vec3 p = g.index_to_physical(0, 0, static_cast<double>(k));
    set("0008|0060", "CT");
    set("0008|0016", "1.2.840.10008.5.1.4.1.1.2");  // CT Image Storage
    set("0008|103e", description);
    set("0010|0010", "Tessera^Phantom");
    set("0010|0020", "TESSERA0001");
    // Study, series, frame-of-reference and instance UIDs are generated by
    // GDCMImageIO (one series per writer), under GDCM's registered root.
    set("0020|0011", "1");
    set("0020|0013", std::to_string(k + 1));
    set("0020|0032", fmt_double(p[0]) + "\\" + fmt_double(p[1]) + "\\" + fmt_double(p[2]));
    set("0020|0037", orient.str());
    // PixelSpacing is row spacing (between rows, i.e. along j) then column spacing.
    set("0028|0030", fmt_double(g.spacing[1]) + "\\" + fmt_double(g.spacing[0]));
    set("0018|0050", fmt_double(g.spacing[2]));
    set("0028|0004", "MONOCHROME2");
    char name[32];
    std::snprintf(name, sizeof name, "/IM%04lld.dcm", static_cast<long long>(k));
    files.push_back(dir + name);
  }
  auto writer = itk::ImageSeriesWriter<detail::Image3<T>, Image2>::New();
  writer->SetInput(img);
  writer->SetImageIO(io);
  writer->SetFileNames(files);
  std::vector<itk::MetaDataDictionary*> dict_ptrs;
  for (auto& d : dicts) dict_ptrs.push_back(&d);
  writer->SetMetaDataDictionaryArray(&dict_ptrs);
  writer->Update();
}

}  // namespace

void write_dicom_series(const std::string& dir, const Volume& v, const std::string& series_description) {
  detail::register_itk_io_factories();
  v.validate();
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec))
    throw std::runtime_error(dir + ": folder exists and is not empty; DICOM series are written into a new folder");
  // Slices go into a temp folder that is renamed into place at the end, so a
  // half-written series never appears under the final name.
  const std::string tmp = dir + ".tmp." + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) throw std::runtime_error(dir + ": cannot create folder: " + ec.message());
  try {
    switch (v.pixel_type) {
      case PixelType::kInt16: write_series_typed<std::int16_t>(tmp, v, series_description); break;
      case PixelType::kUInt16: write_series_typed<std::uint16_t>(tmp, v, series_description); break;
      case PixelType::kUInt8: write_series_typed<std::uint8_t>(tmp, v, series_description); break;
      default:
        throw std::runtime_error(dir + ": DICOM series need int16, uint16 or uint8 voxels, not " +
                                 pixel_type_name(v.pixel_type));
    }
  } catch (const itk::ExceptionObject& e) {
    fs::remove_all(tmp, ec);
    throw std::runtime_error(dir + ": cannot write DICOM series: " + detail::describe(e));
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  fs::remove(dir, ec);  // an empty folder may stand in the way
  fs::rename(tmp, dir, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove_all(tmp, ec);
    throw std::runtime_error(dir + ": cannot move the finished series into place: " + why);
  }
}

}  // namespace tessera::io
