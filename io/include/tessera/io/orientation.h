// Canonical orientation of volumes, and its exact inverse.
//
// Conventions (the source of most silent errors in medical imaging):
//  * ITK, and so Volume::geometry, works in LPS physical space: +x = Left,
//    +y = Posterior, +z = Superior. Column c of the direction matrix is the
//    LPS direction in which index c increases.
//  * Orientation codes here are "points-to" codes as nibabel and MONAI write
//    them: letter c names where index c increases towards. ITK's identity
//    direction is therefore "LPS".
//  * MONAI's Orientation(axcodes="RAS") (and nibabel's as_closest_canonical)
//    makes index 0 increase to the Right, 1 to the Anterior, 2 to the
//    Superior. In ITK's LPS terms the direction becomes diag(-1, -1, +1) for
//    an axis-aligned scan. reorient(v, "RAS") reproduces that, so networks
//    trained in MONAI after Orientation("RAS") see the same voxel order.
//    (MONAI additionally feeds tensors as [x][y][z]; our buffers are
//    x-fastest, i.e. [z][y][x] when viewed row-major: the model layer permutes.)
// Only whole-axis permutations and flips are applied: voxels are moved, never
// resampled, so the inverse is exact.
#pragma once

#include <array>
#include <string>

#include "tessera/io/volume.h"

namespace tessera::io {

// What reorient() did: output axis a is input axis `axis[a]`, reversed when
// flip[a]; `original` is the geometry before, restored exactly by undo.
struct Reorientation {
  std::array<int, 3> axis{0, 1, 2};
  std::array<bool, 3> flip{false, false, false};
  Geometry original;
};

// The closest orientation code of a direction matrix ("LPS", "RAS", "PIR"...),
// axes matched greedily by the largest cosine, as nibabel's io_orientation does.
std::string orientation_code(const Mat3& direction);

// Permutes and flips axes so that the volume's code becomes `target`
// (three letters, one of L/R, one of A/P, one of S/I). Throws on a bad code.
Volume reorient(const Volume& v, const std::string& target, Reorientation* applied = nullptr);
inline Volume reorient_to_ras(const Volume& v, Reorientation* applied = nullptr) { return reorient(v, "RAS", applied); }

// Moves voxels of a volume in the reoriented frame (e.g. a label map
// predicted on reorient_to_ras(input)) back to the original frame, with the
// original geometry restored bit for bit. Throws when sizes disagree.
Volume undo_reorientation(const Volume& reoriented, const Reorientation& applied);

}  // namespace tessera::io
