// Resampling one axis of a [C, *spatial] tensor at given voxel coordinates:
// the building block of MONAI's Spacing and its inverse (spacing.h), done one
// axis at a time (separable trilinear / nearest).
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace tessera::patching {

enum class Interp { linear, nearest };

// Samples dim `dim` of x at `pos` (voxel coordinates along it, clamped to [0, n - 1]: border
// padding): linear between the two neighbours (float32 result), or the nearest voxel with ties
// to even as torch's grid_sample (x's dtype kept).
at::Tensor sample_along(const at::Tensor& x, int64_t dim, const std::vector<double>& pos, Interp interp);

}  // namespace tessera::patching
