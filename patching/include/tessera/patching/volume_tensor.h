// io::Volume ↔ tensors in MONAI's axis order. A Volume's buffer is
// x-fastest (ITK), i.e. [z][y][x] row-major; MONAI (and weights trained
// there) index images as [C, x, y, z]. These two functions are the only
// place that permutes.
#pragma once

#include <ATen/ATen.h>

#include "tessera/io/volume.h"

namespace tessera::patching {

// [1, X, Y, Z] float32 voxel values (HU for CT) on `device`: the voxels travel in their stored
// type and are permuted and converted there.
at::Tensor volume_to_tensor(const io::Volume& v, const at::Device& device = at::kCPU);

// A [X, Y, Z] or [1, X, Y, Z] tensor on `geometry`, stored as `type`
// (values rounded and saturated for integer types).
io::Volume tensor_to_volume(const at::Tensor& t, const io::Geometry& geometry, io::PixelType type);

}  // namespace tessera::patching
