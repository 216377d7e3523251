// Swin UNETR segmentation training: batches from crop_sampler, Dice + CE,
// AdamW over fp32 master weights with warm-up + cosine decay, gradient
// clipping, bf16/fp16 mixed precision (fp16 with dynamic loss scaling),
// sliding-window validation Dice per label, a metrics CSV and atomic
// checkpoints from which a run resumes bit for bit (on the CPU).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessera/train/phase_metrics.h"
#include "tessera/train/train_config.h"

namespace tessera::train {

struct TrainOptions {
  std::string out_dir;               // checkpoint.safetensors, model.safetensors, metrics.csv, summary.json
  std::string device = "cpu";        // cpu | cuda
  std::string precision = "fp32";    // fp32 | bf16 | fp16 (fp16: CUDA only)
  std::string attention = "tessera"; // tessera | torch_sdpa | reference (float64, for checks)
  std::string resume;                // a checkpoint.safetensors to continue from
  int64_t stop_after = -1;           // stop (checkpointed) once this many steps are done; -1: run to optim.steps
  int64_t checkpoint_every = 0;      // steps; 0 = at each validation and at the end
  bool validate = true;              // false: skip validation (speed runs, tests)
  std::string weights_dtype = "fp32";  // model.safetensors' float dtype: fp32 | fp16 | bf16 (half the size, to ship)
};

struct StepStats {
  int64_t step = 0, steps = 0;  // step just done (1-based) of steps
  double lr = 0, loss = 0, grad_norm = 0, loss_scale = 1, seconds = 0;
  double loss_a = 0, loss_b = 0;  // the loss's logged terms: segmentation Dice and CE; classification CE and 0
  bool skipped = false;  // fp16 overflow: no update, loss scale halved
};

struct ValStats {
  int64_t step = 0;
  std::string metric;               // "Dice" (segmentation) or "recall" (classification)
  std::vector<std::string> names;   // the classes per_class is for
  std::vector<double> per_class;    // segmentation: labels 1..C-1 (NaN when absent from prediction and truth)
  double mean = 0;                  // over classes present (classification: balanced accuracy)
  double accuracy = -1;             // classification: fraction correct (< 0: not computed)
  std::optional<PhaseMetrics> phases;  // token-level classification: per video, then over videos (phase_metrics.h)
};

struct TrainResult {
  int64_t steps_done = 0;
  double seconds = 0;
  StepStats last_step;
  ValStats last_val;
  bool validated = false;
  std::string checkpoint, weights, metrics, summary;
};

struct TrainCallbacks {
  std::function<void(const std::string& phase, int64_t done, int64_t total)> progress;  // "data", "train", "val"
  std::function<void(const StepStats&)> on_step;
  std::function<void(const ValStats&)> on_validation;
};

TrainResult train_segmentation(const TrainConfig& config, const TrainOptions& options, const TrainCallbacks& callbacks = {});

}  // namespace tessera::train
