// Reading and writing volumes through ITK: NIfTI (.nii, .nii.gz), NRRD
// (.nrrd, .nhdr), MetaImage (.mha, .mhd) and DICOM series (a folder).
#pragma once

#include <string>
#include <vector>

#include "tessera/io/volume.h"

namespace tessera::io {

struct VolumeReadOptions {
  // DICOM folders with several series: the series to read (an id from
  // list_dicom_series, or the start of one). Empty: the folder must hold one.
  std::string series_uid;
  // Convert voxels to float32 (NIfTI scl_slope/scl_inter and DICOM rescale
  // are applied by ITK either way; this only changes the stored type).
  bool as_float = false;
};

// Reads a 3D scalar volume with its geometry. 2D images become one slice;
// 4D images with more than one time point and vector/RGB voxels are refused
// with an error that says so (no silent guess at a channel axis).
// Throws std::runtime_error whose message starts with the path.
Volume read_volume(const std::string& path, const VolumeReadOptions& options = {});

// Writes v with exactly its geometry. The format follows the extension:
// .nii, .nii.gz, .nrrd, .mha (single-file formats only, so the write can be
// atomic). Voxel data are compressed where the format allows; `gzip_level` is zlib's level for .nii.gz (1 for
// label maps: mostly runs of one value, they shrink well even at the fastest level).
void write_volume(const std::string& path, const Volume& v, bool compress = true, int gzip_level = 6);

// Whether ITK has a reader for this file (by content and extension).
bool can_read_volume_file(const std::string& path);

}  // namespace tessera::io
