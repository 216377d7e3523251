// Resampling volumes to a target voxel spacing, and back, with an exact
// inverse on the original grid. Tensors are [C, *spatial], `spacing` lists
// the millimetres per voxel along each spatial dim of the tensor.
//
// The output grid keeps the first voxel centre where it was and spans the
// same voxel centres: n_out = round((n - 1) * s / s_target) + 1, and the
// spacing actually used is s * (n - 1) / (n_out - 1) (within half a voxel of
// the target; reported back so geometry stays exact). Images are
// interpolated trilinearly between voxel centres (align_corners = True),
// labels take the nearest voxel centre. Resampling back to the original size
// samples exactly the original voxel centres, which is what "segment writes a
// mask on the input's own voxels" needs; when the spacing ratio is an integer
// the original centres are grid points of the resampled volume and the round
// trip returns the input unchanged.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace tessera::patching {

enum class Interp { linear, nearest };

struct Resampled {
  at::Tensor data;              // [C, *spatial_out]
  std::vector<double> spacing;  // the spacing actually used, per spatial dim
};

Resampled resample_to_spacing(const at::Tensor& x, const std::vector<double>& spacing,
                              const std::vector<double>& target_spacing, Interp interp);

// Samples dim `dim` of x at `pos` (voxel coordinates along it, clamped to [0, n - 1]: border
// padding): linear between the two neighbours (float32 result), or the nearest voxel with ties
// to even as torch's grid_sample (x's dtype kept).
at::Tensor sample_along(const at::Tensor& x, int64_t dim, const std::vector<double>& pos, Interp interp);

// Resamples [C, *spatial] to the given spatial size on the same extent of
// voxel centres (the inverse of resample_to_spacing when `size` is the original size).
at::Tensor resample_to_size(const at::Tensor& x, const std::vector<int64_t>& size, Interp interp);

}  // namespace tessera::patching
