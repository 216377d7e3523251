// The trainable state every task shares: a module's parameters in the compute
// dtype (fp32, bf16 or fp16), their fp32 master copies, AdamW over the
// masters, the fp16 loss scale, and the way to and from a checkpoint.
#pragma once

#include <torch/nn/module.h>

#include <map>
#include <string>
#include <vector>

#include "tessera/train/adamw.h"
#include "tessera/train/checkpoint.h"

namespace tessera::train {

struct Update {
  double grad_norm = 0;
  bool skipped = false;  // fp16 overflow: no update, the loss scale was halved
};

class MasterWeights {
 public:
  // Casts the module's floating parameters and buffers to `dtype` (already on its device).
  MasterWeights(torch::nn::Module& module, torch::ScalarType dtype, const OptimConfig& config);
  // The loss to call backward() on (multiplied by the loss scale in fp16).
  at::Tensor scale(const at::Tensor& loss) const;
  // Takes the parameters' gradients (clearing them), unscales and clips them;
  // when finite, one AdamW step on the masters, copied back to the module.
  // Non-finite gradients throw in fp32/bf16 and skip the step in fp16.
  Update step(double lr, const std::string& where);
  double loss_scale() const { return loss_scale_; }
  // Everything a resume needs (the seed is the caller's).
  Checkpoint checkpoint(int64_t step, uint64_t seed) const;
  void restore(const Checkpoint& c, const std::string& path);
  // Master weights and buffers under their module names, floats as `dtype`
  // (as float32: views of the live masters, valid until the next step).
  std::map<std::string, at::Tensor> weights(torch::ScalarType dtype) const;

 private:
  torch::nn::Module& module_;
  torch::ScalarType dtype_;
  OptimConfig config_;
  std::vector<std::string> names_;
  std::vector<at::Tensor> params_, masters_;
  AdamW adamw_;
  double loss_scale_;
  int64_t good_steps_ = 0;
};

// Restores `state` from the checkpoint at `path` when it is not empty and returns the steps
// it had done (0 without a checkpoint); throws naming the file when it was trained with
// another seed or is past `steps`.
int64_t resume_from(const std::string& path, MasterWeights& state, uint64_t seed, int64_t steps);

// "fp32" | "bf16" | "fp16" -> dtype; throws on anything else.
torch::ScalarType precision_dtype(const std::string& precision);

}  // namespace tessera::train
