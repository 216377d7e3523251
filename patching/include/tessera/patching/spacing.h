// MONAI's Spacing (1.5; scale_extent False, padding "border", align_corners
// False, no min/max pixdim) and its inverse as Invertd computes it, on
// [C, *spatial] tensors whose spatial axes carry `spacing` mm per voxel.
//
// MONAI keeps the axis directions and moves every output voxel to exactly
// `pixdim`: output voxel o along an axis is the input point o * pixdim /
// spacing (the first voxel centres coincide), with
// n_out = round_half_even((n - 1) * spacing / pixdim + 1). Points past the
// last input centre take the border value. An axis whose spacing is within
// 1e-3 mm of pixdim is left alone, as MONAI's AFFINE_TOL does.
// The inverse samples the resampled grid at i * spacing / pixdim for each
// original voxel i, which is what Invertd's SpatialResample back to the
// original affine does.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "tessera/patching/resample.h"

namespace tessera::patching {

// The pixdim MONAI actually applies (the input's own spacing where it is within 1e-3 mm).
std::vector<double> effective_pixdim(const std::vector<double>& spacing, const std::vector<double>& pixdim);

// The spatial size Spacing produces.
std::vector<int64_t> spacing_output_size(const std::vector<int64_t>& size, const std::vector<double>& spacing,
                                         const std::vector<double>& pixdim);

// Spacing(pixdim, mode): linear is grid_sample's (tri)linear, nearest its nearest.
at::Tensor spacing_resample(const at::Tensor& x, const std::vector<double>& spacing, const std::vector<double>& pixdim,
                            Interp interp);

// Inverse of spacing_resample(x, spacing, pixdim): y back onto x's grid of `size` voxels.
at::Tensor invert_spacing(const at::Tensor& y, const std::vector<double>& spacing, const std::vector<double>& pixdim,
                          const std::vector<int64_t>& size, Interp interp);

// Invertd then AsDiscreted(argmax): class scores [C, *spatial] on the resampled grid →
// int32 labels [1, *size] on the original grid, a slab of the last axis at a time, so the
// full-size C-channel volume never exists.
at::Tensor invert_spacing_argmax(const at::Tensor& scores, const std::vector<double>& spacing,
                                 const std::vector<double>& pixdim, const std::vector<int64_t>& size, Interp interp);

}  // namespace tessera::patching
