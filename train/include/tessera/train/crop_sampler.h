// Training batches: random ROI crops (centred on a labelled voxel with
// probability foreground_fraction, as MONAI's RandCropByPosNegLabeld), random
// flips and intensity scale/shift. Every random number of step s comes from
// a generator seeded with (seed, s): a run resumed at step s draws exactly
// the batches an uninterrupted run would, with no RNG state to carry.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "tessera/train/seg_dataset.h"

namespace tessera::train {

struct SegBatch {
  at::Tensor image;  // float32 [B, 1, rx, ry, rz]
  at::Tensor label;  // int64 [B, rx, ry, rz]
};

SegBatch sample_batch(const std::vector<SegCase>& cases, const CropConfig& crop, const AugmentConfig& aug,
                      int64_t batch_size, uint64_t seed, int64_t step);

}  // namespace tessera::train
