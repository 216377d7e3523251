// DICOM SEG through DCMTK's dcmseg: DcmSegmentation builds the IOD (modules,
// functional groups, bit-packed frames); we supply the source series'
// references, per-frame geometry and the segment descriptions.
#include <dcmtk/config/osconfig.h>  // first, as DCMTK requires

#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmfg/fgderimg.h>
#include <dcmtk/dcmfg/fgfracon.h>
#include <dcmtk/dcmfg/fgpixmsr.h>
#include <dcmtk/dcmfg/fgplanor.h>
#include <dcmtk/dcmfg/fgplanpo.h>
#include <dcmtk/dcmfg/fgseg.h>
#include <dcmtk/dcmiod/cielabutil.h>
#include <dcmtk/dcmiod/iodreferences.h>
#include <dcmtk/dcmseg/segdoc.h>
#include <dcmtk/dcmseg/segment.h>
#include <dcmtk/oflog/oflog.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <vector>

#include "tessera/io/atomic_file.h"
#include "tessera/io/dicom_seg.h"
#include "tessera/io/dicom_series.h"

namespace tessera::io {
namespace {

struct SourceSlice {
  std::string file, sop_class, sop_instance, series_uid, study_uid, patient_id, frame_of_reference;
  std::string position[3], orientation[6], pixel_spacing, slice_thickness;
  std::unique_ptr<DcmFileFormat> dcm;  // kept for the Derivation Image references
};

void check(const OFCondition& c, const std::string& path, const std::string& what) {
  if (c.bad()) throw std::runtime_error(path + ": DICOM SEG: " + what + ": " + c.text());
}

std::string get_string(DcmDataset* ds, const DcmTagKey& tag, long pos = -1) {
  OFString v;
  if (pos < 0) ds->findAndGetOFStringArray(tag, v);
  else ds->findAndGetOFString(tag, v, static_cast<unsigned long>(pos));
  return std::string(v.c_str());
}

// A SNOMED CT code for the organs a CT segmentation model usually knows.
struct Coded {
  const char* value;
  const char* meaning;
};

std::string normalize(std::string n) {
  for (auto& c : n) c = (c == ' ' || c == '-') ? '_' : char(std::tolower(static_cast<unsigned char>(c)));
  return n;
}

const Coded* organ_code(const std::string& name) {
  static const std::map<std::string, Coded> table = {
      {"liver", {"10200004", "Liver"}},
      {"spleen", {"78961009", "Spleen"}},
      {"kidney_left", {"18639004", "Left kidney"}},
      {"left_kidney", {"18639004", "Left kidney"}},
      {"kidney_right", {"9846003", "Right kidney"}},
      {"right_kidney", {"9846003", "Right kidney"}},
      {"kidney", {"64033007", "Kidney"}},
      {"pancreas", {"15776009", "Pancreas"}},
      {"aorta", {"15825003", "Aorta"}},
      {"stomach", {"69695003", "Stomach"}},
      {"gallbladder", {"28231008", "Gallbladder"}},
      {"esophagus", {"32849002", "Esophagus"}},
      {"oesophagus", {"32849002", "Esophagus"}},
      {"inferior_vena_cava", {"64131007", "Inferior vena cava"}},
      {"ivc", {"64131007", "Inferior vena cava"}},
      {"portal_vein", {"32764006", "Portal vein"}},
      {"splenic_vein", {"35819009", "Splenic vein"}},
      {"portal_vein_and_splenic_vein", {"32764006", "Portal vein"}},
      {"portal_and_splenic_vein", {"32764006", "Portal vein"}},
      {"adrenal_gland", {"23451007", "Adrenal gland"}},
      {"adrenal_gland_left", {"23451007", "Adrenal gland"}},
      {"adrenal_gland_right", {"23451007", "Adrenal gland"}},
      {"left_adrenal_gland", {"23451007", "Adrenal gland"}},
      {"right_adrenal_gland", {"23451007", "Adrenal gland"}},
      {"bladder", {"89837001", "Urinary bladder"}},
      {"urinary_bladder", {"89837001", "Urinary bladder"}},
      {"lung", {"39607008", "Lung"}},
      {"lungs", {"39607008", "Lung"}},
      {"lung_left", {"44029006", "Left lung"}},
      {"left_lung", {"44029006", "Left lung"}},
      {"lung_right", {"3341006", "Right lung"}},
      {"right_lung", {"3341006", "Right lung"}},
  };
  const auto it = table.find(normalize(name));
  return it == table.end() ? nullptr : &it->second;
}

// The overlay palette of `segment` (sRGB), so the SEG shows the same colours.
void display_colour(std::int64_t label, Uint16& L, Uint16& a, Uint16& b) {
  static const double palette[][3] = {{230, 25, 75},  {60, 180, 75},  {255, 225, 25}, {0, 130, 200},
                                      {245, 130, 48}, {145, 30, 180}, {70, 240, 240}, {240, 50, 230},
                                      {210, 245, 60}, {0, 128, 128},  {170, 110, 40}};
  const double* c = palette[(label - 1) % 11];
  double dl, da, db;
  IODCIELabUtil::rgb2DicomLab(dl, da, db, c[0] / 255.0, c[1] / 255.0, c[2] / 255.0);
  L = Uint16(std::lround(dl));
  a = Uint16(std::lround(da));
  b = Uint16(std::lround(db));
}

template <class T> std::vector<std::int64_t> labels_as_int64(const Volume& v) {
  const T* p = v.data<T>();
  return std::vector<std::int64_t>(p, p + v.geometry.voxel_count());
}

std::vector<std::int64_t> label_values(const Volume& v, const std::string& path) {
  switch (v.pixel_type) {
    case PixelType::kUInt8: return labels_as_int64<std::uint8_t>(v);
    case PixelType::kInt8: return labels_as_int64<std::int8_t>(v);
    case PixelType::kUInt16: return labels_as_int64<std::uint16_t>(v);
    case PixelType::kInt16: return labels_as_int64<std::int16_t>(v);
    case PixelType::kUInt32: return labels_as_int64<std::uint32_t>(v);
    case PixelType::kInt32: return labels_as_int64<std::int32_t>(v);
    default:
      throw std::runtime_error(path + ": DICOM SEG needs an integer label map, not " + std::string(pixel_type_name(v.pixel_type)));
  }
}

}  // namespace

bool dicom_seg_supported() { return true; }

DicomSegSummary write_dicom_seg(const std::string& path, const Volume& labels, const std::string& source_dir,
                                const DicomSegOptions& opt) {
  OFLog::configure(OFLogger::ERROR_LOG_LEVEL);  // DCMTK's warnings would go to stderr
  labels.validate();
  const auto& g = labels.geometry;
  const DicomSeries series = find_dicom_series(source_dir, opt.series_uid);

  // The source slices, in the series' position order (the order of the label map's k).
  std::vector<SourceSlice> slices(series.files.size());
  for (size_t k = 0; k < series.files.size(); ++k) {
    SourceSlice& s = slices[k];
    s.file = series.files[k];
    s.dcm = std::make_unique<DcmFileFormat>();
    check(s.dcm->loadFile(s.file.c_str()), s.file, "cannot read source slice");
    DcmDataset* ds = s.dcm->getDataset();
    s.sop_class = get_string(ds, DCM_SOPClassUID);
    s.sop_instance = get_string(ds, DCM_SOPInstanceUID);
    s.series_uid = get_string(ds, DCM_SeriesInstanceUID);
    s.study_uid = get_string(ds, DCM_StudyInstanceUID);
    s.patient_id = get_string(ds, DCM_PatientID);
    s.frame_of_reference = get_string(ds, DCM_FrameOfReferenceUID);
    for (int i = 0; i < 3; ++i) s.position[i] = get_string(ds, DCM_ImagePositionPatient, i);
    for (int i = 0; i < 6; ++i) s.orientation[i] = get_string(ds, DCM_ImageOrientationPatient, i);
    s.pixel_spacing = get_string(ds, DCM_PixelSpacing);
    s.slice_thickness = get_string(ds, DCM_SliceThickness);
    if (s.sop_instance.empty() || s.position[2].empty() || s.orientation[5].empty())
      throw std::runtime_error(s.file + ": source slice without SOP Instance UID, Image Position or Image Orientation (Patient)");
  }
  Uint16 rows = 0, cols = 0;
  slices.front().dcm->getDataset()->findAndGetUint16(DCM_Rows, rows);
  slices.front().dcm->getDataset()->findAndGetUint16(DCM_Columns, cols);

  // The label map must lie on the series' own grid: columns × rows × slices, slice k at file k's position.
  if (g.size[0] != cols || g.size[1] != rows || g.size[2] != std::int64_t(slices.size()))
    throw std::runtime_error(path + ": the label map (" + std::to_string(g.size[0]) + "x" + std::to_string(g.size[1]) + "x" +
                             std::to_string(g.size[2]) + ") is not on the grid of the series in " + source_dir + " (" +
                             std::to_string(cols) + "x" + std::to_string(rows) + "x" + std::to_string(slices.size()) + ")");
  for (size_t k = 0; k < slices.size(); ++k) {
    const Vec3 p = g.index_to_physical(0, 0, double(k));
    for (int i = 0; i < 3; ++i)
      if (std::abs(std::stod(slices[k].position[i]) - p[i]) > 1e-2)
        throw std::runtime_error(path + ": the label map's slice " + std::to_string(k) + " is not at " + slices[k].file +
                                 "'s Image Position (Patient): the map is not on the source series' grid");
  }

  // Which labels hold voxels (empty labels are omitted), and where.
  const std::vector<std::int64_t> values = label_values(labels, path);
  std::map<std::int64_t, std::int64_t> counts;
  for (std::int64_t v : values)
    if (v != 0) ++counts[v];
  if (counts.empty()) throw std::runtime_error(path + ": the label map holds no labelled voxel; a DICOM SEG needs at least one segment");
  if (counts.begin()->first < 0) throw std::runtime_error(path + ": negative label values cannot become DICOM segments");

  IODGeneralEquipmentModule::EquipmentInfo equipment("Tessera", "tessera", "0", "tessera");
  ContentIdentificationMacro content("1", "SEGMENTATION", "tessera segment label map", "Tessera^Segment");
  DcmSegmentation* raw = nullptr;
  check(DcmSegmentation::createBinarySegmentation(raw, rows, cols, equipment, content), path, "create");
  std::unique_ptr<DcmSegmentation> seg(raw);
  check(seg->importFromSourceImage(*slices.front().dcm->getDataset()), path, "import patient/study/frame of reference");
  seg->getSeries().setSeriesDescription(opt.series_description.substr(0, 64).c_str(), OFFalse);
  seg->getSeries().setSeriesNumber("300");

  // Referenced Series Sequence: every source instance.
  IODReferences refs;
  for (const auto& s : slices)
    refs.add(new IODImageReference(s.patient_id.c_str(), s.study_uid.c_str(), s.series_uid.c_str(), s.sop_instance.c_str(),
                                   s.sop_class.c_str()));
  if (seg->getCommonInstanceReference().addReferences(refs) != slices.size())
    throw std::runtime_error(path + ": DICOM SEG: cannot reference every source instance");

  // Shared: pixel measures and orientation of the source slices.
  FGPixelMeasures measures;
  check(measures.setPixelSpacing(slices.front().pixel_spacing.c_str()), path, "pixel spacing");
  char thickness[32];
  std::snprintf(thickness, sizeof thickness, "%.6g", g.spacing[2]);
  check(measures.setSliceThickness(slices.front().slice_thickness.empty() ? thickness : slices.front().slice_thickness.c_str()),
        path, "slice thickness");
  check(seg->addForAllFrames(measures), path, "pixel measures");
  const auto& o = slices.front().orientation;
  FGPlaneOrientationPatient orientation;
  check(orientation.setImageOrientationPatient(o[0].c_str(), o[1].c_str(), o[2].c_str(), o[3].c_str(), o[4].c_str(), o[5].c_str()),
        path, "orientation");
  check(seg->addForAllFrames(orientation), path, "orientation");

  // Dimensions: segment number, then the position of the plane.
  const std::string dim_uid = [] {
    char buf[100];
    return std::string(dcmGenerateUniqueIdentifier(buf, SITE_INSTANCE_UID_ROOT));
  }();
  auto& dims = seg->getDimensions();
  check(dims.addDimensionIndex(DCM_ReferencedSegmentNumber, dim_uid.c_str(), DCM_SegmentIdentificationSequence,
                               "ReferencedSegmentNumber"),
        path, "dimension index");
  check(dims.addDimensionIndex(DCM_ImagePositionPatient, dim_uid.c_str(), DCM_PlanePositionSequence, "ImagePositionPatient"), path,
        "dimension index");

  const CodeSequenceMacro purpose("121322", "DCM", "Source image for image processing operation");
  const CodeSequenceMacro derivation("113076", "DCM", "Segmentation");
  const size_t plane = size_t(cols) * rows;
  std::vector<Uint8> frame(plane);
  DicomSegSummary summary;
  for (const auto& [value, n] : counts) {
    (void)n;
    const auto nit = opt.names.find(value);
    const std::string name = nit != opt.names.end() ? nit->second : "label_" + std::to_string(value);
    const Coded* code = organ_code(name);
    const CodeSequenceMacro category = code ? CodeSequenceMacro("123037004", "SCT", "Anatomical Structure")
                                            : CodeSequenceMacro("85756007", "SCT", "Tissue");
    const CodeSequenceMacro type = code ? CodeSequenceMacro(code->value, "SCT", code->meaning) : CodeSequenceMacro("85756007", "SCT", "Tissue");
    DcmSegment* segment = nullptr;
    check(DcmSegment::create(segment, name.substr(0, 64).c_str(), category, type, DcmSegTypes::SAT_AUTOMATIC, opt.algorithm_name.c_str()),
          path, "segment '" + name + "'");
    Uint16 L, a, b;
    display_colour(value, L, a, b);
    segment->setRecommendedDisplayCIELabValue(L, a, b);
    segment->setSegmentDescription(name.substr(0, 64).c_str(), OFFalse);
    if (!opt.algorithm_version.empty()) {
      segment->getSegmentationAlgorithmIdentification().setAlgorithmVersion(opt.algorithm_version.substr(0, 64).c_str(), OFFalse);
    }
    Uint16 number = 0;
    check(seg->addSegment(segment, number), path, "add segment '" + name + "'");
    ++summary.segments;

    std::uint32_t plane_index = 0;
    for (size_t k = 0; k < slices.size(); ++k) {
      ++plane_index;
      // Volume slice k is x-fastest: index i runs along the row direction, i.e. it is the column.
      const std::int64_t* src = values.data() + k * plane;
      bool any = false;
      for (size_t i = 0; i < plane; ++i) any |= (frame[i] = src[i] == value ? 1 : 0) != 0;
      if (!any) continue;
      const SourceSlice& s = slices[k];
      FGPlanePosPatient position;
      check(position.setImagePositionPatient(s.position[0].c_str(), s.position[1].c_str(), s.position[2].c_str()), path, "position");
      FGFrameContent frame_content;
      frame_content.setDimensionIndexValues(number, 0);
      frame_content.setDimensionIndexValues(Uint32(k + 1), 1);
      FGDerivationImage derivation_fg;
      DerivationImageItem* item = nullptr;
      check(derivation_fg.addDerivationImageItem(derivation, "Segmentation by tessera", item), path, "derivation image");
      SourceImageItem* source = nullptr;
      check(item->addSourceImageItem(s.dcm->getDataset(), purpose, source), path, "source image of frame");
      OFVector<FGBase*> per_frame;
      per_frame.push_back(&position);
      per_frame.push_back(&frame_content);
      per_frame.push_back(&derivation_fg);
      check(seg->addFrame(frame.data(), number, per_frame), path, "add frame");
      ++summary.frames;
    }
  }

  write_atomically_keeping_extension(path, [&](const std::string& tmp) {
    check(seg->saveFile(tmp.c_str(), EXS_LittleEndianExplicit), path, "write");
  });
  return summary;
}

}  // namespace tessera::io
