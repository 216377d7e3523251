// What `tessera train --config configs/train_*.yaml` reads: one YAML file with
// sections data / preprocess / crop / augment / optim / validation. Unknown
// keys are errors (a typo must not silently train with a default).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::train {

// Where image/label pairs come from.
//  - source: folder  -> `path` holds imagesTr/ and labelsTr/ (nnU-Net/MSD layout) with files of the same name
//  - source: csv     -> `path` is a CSV with columns image,label (paths relative to the CSV's folder)
//  - source: phantom -> `count` generated CT phantoms (tessera::io::make_random_ct_phantom), seeds from `seed`
struct DataSplit {
  std::string source = "phantom";
  std::string path;
  int64_t count = 0;     // phantom only
  uint64_t seed = 0;     // phantom only: phantom i uses seed + i
};

struct PreprocessConfig {
  std::vector<double> spacing;  // mm (x y z, RAS); empty = keep the file's spacing
  double a_min = -175, a_max = 250;  // CT window -> [0, 1], clipped (MONAI ScaleIntensityRanged)
  bool zscore = false;               // MR: z-score the non-zero voxels instead
};

struct CropConfig {
  std::array<int64_t, 3> roi{64, 64, 64};  // multiples of 32 (Swin UNETR)
  double foreground_fraction = 0.67;       // crops centred on a labelled voxel (RandCropByPosNegLabeld pos/(pos+neg))
};

struct AugmentConfig {
  std::vector<int> flip_axes;   // RAS axes that may be flipped (0 = x ...); empty: none (left/right organs!)
  double flip_prob = 0.5;
  double intensity_scale = 0.1;  // x (1 + U(-s, s)) with probability intensity_prob
  double intensity_shift = 0.1;  // + U(-t, t)
  double intensity_prob = 0.5;
};

struct OptimConfig {
  int64_t steps = 1000;
  int64_t batch_size = 2;
  double lr = 1e-3, min_lr = 1e-5, weight_decay = 1e-5;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  int64_t warmup_steps = 50;
  double grad_clip = 1.0;  // global L2 norm; <= 0 disables
  double dice_weight = 1.0, ce_weight = 1.0;
};

struct ValidationConfig {
  int64_t every = 100;  // steps; 0 = only at the end
  double overlap = 0.25;
  int64_t sw_batch = 4;
};

// task: classification: the long-sequence aggregator (models/aggregator.h)
// with a classification head, over feature files listed in a CSV (columns
// features,label): Trident/CLAM .h5 tile features (2-D grid positions) or
// `tessera video`'s *_embeddings.safetensors (1-D positions in seconds).
//  - level: bag   -> one label per file (a class name from `labels` or its index); the head reads the pooled embedding
//  - level: token -> `label` is a CSV with one row per token (column `label` or `phase`), e.g. a phase per second,
//                    or a frame-level phase annotation at `label_fps` (Cholec80's videoXX-phase.txt: Frame<TAB>Phase),
//                    resampled to one label per embedded second; validation adds surgical-phase metrics (phase_metrics.h)
// With `model: configs/vit_*.yaml` instead, a timm ViT (optionally from `pretrained` timm weights, its head
// replaced) is trained on labelled tile images: a folder with one subfolder per class, or a CSV image,label.
// With `model: configs/gigapath_slide_*.yaml` (a LongNetViT config), GigaPath's slide encoder (optionally
// from `pretrained`, e.g. the published slide_encoder.pth) is fine-tuned with a linear head over Trident .h5
// tile features at their level-0 coordinates (bag level).
struct AggregatorSection {
  int64_t dim = 256, depth = 2, num_heads = 4;
  double mlp_ratio = 4.0;
  std::string position = "rope2d";  // none | rope1d | rope2d
  double rope_base = 100.0;
  bool causal = false;
};

struct TrainConfig {
  std::string path;  // the file this was read from (for messages)
  std::string task = "segmentation";  // segmentation | classification
  std::string level = "bag";          // classification: bag | token
  AggregatorSection aggregator;       // classification
  std::string model;  // segmentation: configs/swin_unetr_*.yaml; classification: configs/vit_*.yaml or empty (aggregator)
  std::string pretrained;       // optional safetensors with encoder weights (swinViT.* keys) to fine-tune from
  std::string pretrained_keys = "monai";  // segmentation: monai | ssl | research, how the pretrained file names its keys
  std::string pretrained_prefix;          // ViT classification: key prefix of the timm weights (e.g. "weights.")
  std::vector<std::string> labels;  // names, index = label value (0 = background)
  double label_fps = 25;            // token level: frame rate of frame-level phase annotations (Cholec80: 25)
  DataSplit train, val;
  PreprocessConfig preprocess;
  CropConfig crop;
  AugmentConfig augment;
  OptimConfig optim;
  ValidationConfig validation;
  uint64_t seed = 0;
  void validate() const;  // ranges and consistency; throws naming `path`
};

// Reads and validates; relative paths in the file are resolved against the
// current directory first, then against the config file's folder.
TrainConfig load_train_config(const std::string& yaml_path);

}  // namespace tessera::train
