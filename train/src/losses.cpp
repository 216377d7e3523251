#include "tessera/train/losses.h"

#include <limits>

namespace tessera::train {

DiceCE dice_ce_loss(const at::Tensor& logits, const at::Tensor& target, double dice_weight, double ce_weight) {
  TORCH_CHECK(logits.dim() >= 3 && target.dim() == logits.dim() - 1, "dice_ce_loss: logits [B, C, *] and target [B, *], got ",
              logits.sizes(), " and ", target.sizes());
  const at::Tensor x = logits.to(at::kFloat);
  const at::Tensor p = at::softmax(x, 1);
  // one-hot [B, C, *] without materialising an int64 copy per class
  const at::Tensor onehot = at::zeros_like(p).scatter_(1, target.unsqueeze(1), 1.0);
  std::vector<int64_t> spatial;
  for (int64_t d = 2; d < x.dim(); ++d) spatial.push_back(d);
  const at::Tensor inter = (p * onehot).sum(spatial);
  const at::Tensor denom = p.sum(spatial) + onehot.sum(spatial);
  const double smooth = 1e-5;
  const at::Tensor dice = (1 - (2 * inter + smooth) / (denom + smooth)).mean();
  // nn.CrossEntropyLoss over the class dim, mean over voxels (MONAI squeezes the one-hot back to indices)
  const at::Tensor ce = at::cross_entropy_loss(x, target, {}, at::Reduction::Mean, -100, 0.0);
  return {dice_weight * dice + ce_weight * ce, dice, ce};
}

std::vector<double> dice_per_label(const at::Tensor& pred, const at::Tensor& truth, int64_t num_classes) {
  TORCH_CHECK(pred.sizes() == truth.sizes(), "dice_per_label: shapes differ ", pred.sizes(), " vs ", truth.sizes());
  const at::Tensor p = pred.flatten().to(at::kLong), t = truth.flatten().to(at::kLong);
  // Joint histogram: counts of (pred, truth) pairs.
  const at::Tensor joint = at::bincount(p * num_classes + t, {}, num_classes * num_classes).view({num_classes, num_classes});
  const at::Tensor cp = joint.sum(1), ct = joint.sum(0);
  std::vector<double> out;
  for (int64_t k = 1; k < num_classes; ++k) {
    const double both = joint[k][k].item<double>(), sum = cp[k].item<double>() + ct[k].item<double>();
    out.push_back(sum == 0 ? std::numeric_limits<double>::quiet_NaN() : 2 * both / sum);
  }
  return out;
}

}  // namespace tessera::train
