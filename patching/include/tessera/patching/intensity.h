// Volume preprocessing on tensors, with MONAI's semantics (1.5) so that
// weights trained behind MONAI transforms see the same numbers:
//  - scale_intensity_range = ScaleIntensityRange(a_min, a_max, b_min, b_max, clip)
//  - normalize_intensity   = NormalizeIntensity (z-score; population std, as
//    MONAI's torch.std(unbiased=False); a zero std divides by 1; `nonzero`
//    normalises only voxels != 0 and leaves the rest untouched)
//  - crop_foreground / its inverse = CropForeground(select_fn = x > 0, margin)
//  - divisible_pad = DivisiblePad(k, method="symmetric"): half before, rest after.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace tessera::patching {

at::Tensor scale_intensity_range(const at::Tensor& x, double a_min, double a_max, double b_min, double b_max,
                                 bool clip);

at::Tensor normalize_intensity(const at::Tensor& x, bool nonzero, bool channel_wise);

// A box over the spatial dims of a [C, *spatial] tensor: [start, end) per dim.
struct Box {
  std::vector<int64_t> start, end;
};

// The bounding box of voxels with any channel > threshold, grown by `margin`
// and clipped to the image; the whole image when nothing is foreground.
Box foreground_box(const at::Tensor& x, double threshold = 0.0, int64_t margin = 0);
at::Tensor crop(const at::Tensor& x, const Box& box);
// Inverse of crop: places `cropped` back into a tensor of the original
// spatial size filled with `fill`.
at::Tensor uncrop(const at::Tensor& cropped, const Box& box, const std::vector<int64_t>& spatial_size,
                  double fill = 0.0);

// Pads the spatial dims of [C, *spatial] up to multiples of k; returns the
// padded tensor and the box of the original voxels inside it.
std::pair<at::Tensor, Box> divisible_pad(const at::Tensor& x, int64_t k, double value = 0.0);

}  // namespace tessera::patching
