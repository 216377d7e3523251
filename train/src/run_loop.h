// The loop every training task runs around its own step: steps from the
// resumed position to the end (or --stop-after), a metrics row per step,
// validation every validation.every steps and at the last step, checkpoints
// at each validation (or --checkpoint-every) and when stopping, callbacks.
#pragma once

#include <torch/nn/module.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tessera/train/master_weights.h"
#include "tessera/train/seg_trainer.h"

namespace tessera::train {

struct StepLoss {
  at::Tensor total;     // the loss to back-propagate (float32 scalar)
  double part_a = 0, part_b = 0;  // its logged terms (dice_loss, ce_loss ...)
};

struct Loop {
  const TrainConfig& cfg;
  const TrainOptions& opt;
  const TrainCallbacks& cb;
  MasterWeights& state;
  torch::nn::Module& net;
  std::string part_a, part_b;              // metrics.csv names of the logged loss terms
  std::vector<std::string> val_columns;    // metrics.csv validation columns
  std::map<std::string, std::string> info;  // checkpoint provenance
  std::function<StepLoss(int64_t step)> loss;                       // forward of step `step` (0-based)
  std::function<ValStats(int64_t steps_done)> validate;            // in eval mode, no grad
  std::function<std::vector<double>(const ValStats&)> val_cells;  // values for val_columns
};

// Runs steps [start, end); fills everything in TrainResult but weights, summary and seconds.
TrainResult run_loop(const Loop& loop, int64_t start);

}  // namespace tessera::train
