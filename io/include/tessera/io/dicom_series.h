// DICOM series in a folder, found and ordered by GDCM (series UIDs with
// details, slices sorted by image position along the slice normal).
#pragma once

#include <string>
#include <vector>

#include "tessera/io/volume.h"

namespace tessera::io {

struct DicomSeries {
  std::string uid;                 // GDCM series identifier (SeriesInstanceUID plus details)
  std::vector<std::string> files;  // slice files, in position order
  std::string description;         // SeriesDescription (0008|103e), may be empty
  std::string modality;            // Modality (0008|0060), may be empty
};

// All series in `dir` (not recursive). Throws naming dir when it is not a
// readable folder; returns an empty list when it holds no DICOM files.
std::vector<DicomSeries> list_dicom_series(const std::string& dir);

// The series of `dir` that `uid` names (a prefix is enough). Empty uid: the
// folder must hold exactly one series, otherwise the error lists the ones it found.
DicomSeries find_dicom_series(const std::string& dir, const std::string& uid = "");

// Reads one series of `dir` into a volume. Empty uid: the folder must hold
// exactly one series, otherwise the error lists the ones it found.
Volume read_dicom_series(const std::string& dir, const std::string& uid = "", bool as_float = false);

// Writes an integer volume (int16, uint16 or uint8) as a DICOM series of
// one file per slice (IM0000.dcm, ...) into `dir`, with patient position,
// orientation and spacing so that readers rebuild the same geometry.
// Used to make sample data and to test the reader.
void write_dicom_series(const std::string& dir, const Volume& v, const std::string& series_description = "tessera");

}  // namespace tessera::io
