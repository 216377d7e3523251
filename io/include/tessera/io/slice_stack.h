// Whether the slices of a DICOM series, in position order, stack into the
// regular grid a volume describes. ITK's series reader takes the spacing as
// the mean step between the first and last slice and forces an orthogonal
// direction, so a missing slice, an uneven step or a gantry tilt would give a
// volume with wrong geometry instead of an error.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "tessera/io/volume.h"

namespace tessera::io {

struct SliceGeometry {
  std::string file;
  Vec3 position{};                    // ImagePositionPatient (0020,0032), mm
  std::array<double, 6> orientation{};  // ImageOrientationPatient (0020,0037): row then column direction
};

// Throws one line naming `dir` when the slices have different orientations,
// share a position, do not advance along the slice normal (a sheared stack:
// gantry tilt) or are unevenly spaced (missing slices): steps may differ from
// the median step by 1% or 0.01 mm, whichever is larger; the advance may lean
// off the normal by 0.1 degree.
void check_slice_stack(const std::string& dir, const std::vector<SliceGeometry>& slices);

// The geometry tags of a slice from "a\b\c" strings as DICOM stores them; false when either is missing or malformed.
bool parse_slice_geometry(const std::string& position, const std::string& orientation, SliceGeometry& out);

}  // namespace tessera::io
