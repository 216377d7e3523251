// AdamW (decoupled weight decay; PyTorch's torch.optim.AdamW update, step
// for step) over fp32 master weights, the learning-rate schedule and
// gradient clipping. The state is plain tensors so a checkpoint can hold it.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "tessera/train/train_config.h"

namespace tessera::train {

class AdamW {
 public:
  // `params` are the fp32 master weights, updated in place.
  AdamW(std::vector<at::Tensor> params, const OptimConfig& config);
  // One update with gradients matching `params` one to one (any float dtype,
  // already unscaled); `lr` from lr_at().
  void step(const std::vector<at::Tensor>& grads, double lr);
  int64_t steps_taken() const { return t_; }
  // State for checkpoints: exp_avg and exp_avg_sq per parameter, and the step count.
  std::vector<at::Tensor>& exp_avg() { return m_; }
  std::vector<at::Tensor>& exp_avg_sq() { return v_; }
  const std::vector<at::Tensor>& exp_avg() const { return m_; }
  const std::vector<at::Tensor>& exp_avg_sq() const { return v_; }
  void set_steps_taken(int64_t t) { t_ = t; }
  const std::vector<at::Tensor>& params() const { return params_; }

 private:
  std::vector<at::Tensor> params_, m_, v_;
  OptimConfig c_;
  int64_t t_ = 0;
};

// Linear warm-up from lr/warmup to lr over warmup_steps, then cosine decay to
// min_lr at `steps`. `step` counts from 0.
double lr_at(const OptimConfig& c, int64_t step);

// Scales the gradients in place so that their global L2 norm is at most
// max_norm (torch.nn.utils.clip_grad_norm_); returns the norm before clipping.
double clip_grad_norm(std::vector<at::Tensor>& grads, double max_norm);

}  // namespace tessera::train
