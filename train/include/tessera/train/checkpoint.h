// Training checkpoints as one safetensors file: the model's state under
// "model.<MONAI name>" (fp32 master weights), AdamW's moments under
// "optim.exp_avg.<name>" / "optim.exp_avg_sq.<name>", and in the metadata the
// step, the seed (every random draw of step s derives from seed and s, so
// this is the whole RNG state), the fp16 loss scale and the label names.
// Written atomically (temp file, then rename).
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

namespace tessera::train {

struct Checkpoint {
  std::map<std::string, at::Tensor> model;      // name -> fp32 (or integer buffer) tensor
  std::map<std::string, at::Tensor> exp_avg, exp_avg_sq;
  int64_t step = 0;       // steps completed
  uint64_t seed = 0;
  double loss_scale = 1;
  std::map<std::string, std::string> info;  // free-form provenance (config, labels ...)
};

void save_checkpoint(const std::string& path, const Checkpoint& c);
// Throws naming the file when it is not a Tessera training checkpoint.
Checkpoint load_checkpoint(const std::string& path);

}  // namespace tessera::train
