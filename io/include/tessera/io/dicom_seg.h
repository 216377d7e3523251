// A label map → a DICOM Segmentation object (binary SEG, DCMTK's dcmseg) that
// references the DICOM series it was computed from: the same Frame of
// Reference, a Referenced Series Sequence with the source SOP Instances, and
// per frame the source slice's Plane Position (Patient), its orientation and
// a Derivation Image reference to that slice.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "tessera/io/volume.h"

namespace tessera::io {

struct DicomSegOptions {
  std::string series_uid;                   // source series in the folder (as read_dicom_series takes it)
  std::map<std::int64_t, std::string> names;  // label value → name; missing: "label_<k>"
  std::string algorithm_name = "tessera segment";
  std::string algorithm_version;            // e.g. the model config; may be empty
  std::string series_description = "tessera segmentation";
};

struct DicomSegSummary {
  int segments = 0;  // labels with at least one voxel (empty labels are omitted)
  int frames = 0;    // one per (segment, source slice holding that segment)
};

// Writes `labels` (integer voxels, 0 = background; on the source series' own
// grid: same size, origin, spacing and direction as read_dicom_series gives)
// as a binary DICOM SEG at `path` (via a temporary file renamed into place).
// One segment per non-zero label value present, numbered in label order, with
// its name, a recommended display colour and SNOMED CT codes where the name
// is a known organ ("Tissue" otherwise). Frames follow the source slice order,
// segment by segment; slices without voxels of a segment get no frame.
// Throws (naming the file) when the label map is not on the series' grid, or
// holds no labelled voxel at all.
DicomSegSummary write_dicom_seg(const std::string& path, const Volume& labels, const std::string& source_dir,
                                const DicomSegOptions& options = {});

// Whether this build can write DICOM SEG (DCMTK found at configure time).
bool dicom_seg_supported();

}  // namespace tessera::io
