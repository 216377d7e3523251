// Feature files for classification training: each file is one sequence of
// tokens (a slide's tile features or a video's per-second embeddings) with
// its positions and its label(s).
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "tessera/train/train_config.h"

namespace tessera::train {

struct FeatureBag {
  std::string name;
  at::Tensor tokens;     // float32 [N, D]
  at::Tensor positions;  // float32 [N, P]: grid cells (x, y) for slides, seconds for video
  at::Tensor coords;     // float32 [N, 2]: level-0 pixels of each tile (.h5 only; undefined for video)
  at::Tensor labels;     // int64 [1] (bag level) or [N] (token level)
};

// Reads one feature file: .h5 (Trident/CLAM: coords, features; positions = coords / patch_size_level0)
// or .safetensors (`embeddings` [T, D] and `seconds` [T]).
FeatureBag read_feature_file(const std::string& path);

// The CSV manifest `split.path` (columns features,label; paths relative to it), labels mapped
// through `classes` (a name, or an index below classes.size()). Token level: `label` is a CSV with a
// row per token (column label or phase), or a frame-level phase annotation at `label_fps` (Cholec80's
// videoXX-phase.txt, phase_labels.h) resampled to the embedded seconds.
std::vector<FeatureBag> load_bags(const DataSplit& split, const std::vector<std::string>& classes, const std::string& level,
                                  double label_fps);

}  // namespace tessera::train
