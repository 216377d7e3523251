// The model throughputs bench_models and `tessera bench` measure: each model
// is timed with Tessera's attention and with LibTorch's SDPA (the models'
// AttentionBackend) on the same weights and inputs. Random weights: speed does
// not depend on them; the two outputs are compared as a sanity check.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessera/bench/timing.h"

namespace tessera::bench {

// Moves a module to `device` and casts its floating parameters and buffers to
// `dtype` (Module::to(dtype) would cast integer buffers such as Swin's
// relative-position index too).
void cast_module(torch::nn::Module& m, const c10::Device& device, c10::ScalarType dtype);

struct ModelCase {
  std::string name;  // says the model and the batch
  std::string unit;  // what `items` counts: tiles/s, volumes/s, clips/s
  int64_t items = 0;
  std::function<torch::Tensor()> run;  // one forward, without autograd
};

// Sizes by device: on CUDA the ones bench_models has always reported (ViT-B/16
// and ViT-L/16 at batch 256, Swin UNETR fs48 on 4 × 96³, VideoMAE-B on 8 clips);
// on the CPU smaller models and batches that run in seconds. `quick` shrinks
// both further.
std::vector<ModelCase> make_model_cases(const c10::Device& device, c10::ScalarType dtype, bool quick);

struct ModelTiming {
  double tessera_ms = 0;
  std::optional<double> sdpa_ms;    // absent when LibTorch has no SDPA (< 2.0)
  std::optional<double> rel_diff;   // ‖tessera − sdpa‖ / ‖sdpa‖ of the outputs
};
ModelTiming time_model(const ModelCase& c, const TimingOptions& timing);

}  // namespace tessera::bench
