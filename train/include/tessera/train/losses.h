// Segmentation losses and metrics, with MONAI's definitions so numbers
// compare with MONAI training logs.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace tessera::train {

struct DiceCE {
  at::Tensor total, dice, ce;  // scalars; total = dice_weight * dice + ce_weight * ce
};

// MONAI DiceCELoss(to_onehot_y=True, softmax=True, include_background=True,
// smooth_nr=smooth_dr=1e-5, reduction mean): logits [B, C, *], target int64 [B, *].
// Computed in float32 whatever the logits' dtype.
DiceCE dice_ce_loss(const at::Tensor& logits, const at::Tensor& target, double dice_weight = 1.0,
                    double ce_weight = 1.0);

// Per-label Dice of two label maps on the same grid (labels 1..num_classes-1):
// 2|P∩G| / (|P| + |G|); NaN for a label absent from both (excluded from means).
std::vector<double> dice_per_label(const at::Tensor& pred, const at::Tensor& truth, int64_t num_classes);

}  // namespace tessera::train
