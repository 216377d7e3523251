// Loading a StateDict into a torch::nn::Module by name, the way PyTorch's
// load_state_dict does: every parameter and buffer of the module is a key;
// keys the module lacks are "unexpected", module entries the file lacks are
// "missing", and both are reported by name. Checkpoints rarely use our exact
// names, so keys are first mapped: keep only those under a prefix (the
// fixtures' "weights."), strip it, apply renames (MONAI's "module." or
// "swin_vit" -> "swinViT", "fc1" -> "linear1", ...).
#pragma once

#include <torch/nn/module.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/models/safetensors.h"

namespace tessera::models {

struct KeyMapping {
  // Only keys starting with `prefix` are kept, with the prefix removed. Empty: all keys.
  std::string prefix;
  // Applied in order to every kept key: each occurrence of `first` at a
  // component boundary (start of key or after '.') becomes `second`.
  std::vector<std::pair<std::string, std::string>> renames;
  // Keys matching any of these exactly (after mapping) are dropped.
  std::vector<std::string> ignore;
  // When no key starts with `prefix`, keep every key as it is (a default prefix
  // that fits the fixtures' "weights." files and plain checkpoints alike).
  bool prefix_optional = false;
};

StateDict remap_keys(const StateDict& state, const KeyMapping& mapping);

struct LoadReport {
  std::vector<std::string> missing;     // in the module, not in the state dict
  std::vector<std::string> unexpected;  // in the state dict, not in the module
  std::size_t loaded = 0;
  bool complete() const { return missing.empty() && unexpected.empty(); }
  std::string summary() const;  // one line
};

// Copies matching entries into the module's parameters and buffers (dtype is
// converted, e.g. an F32 index table into an int64 buffer). A shape mismatch
// always throws, naming the key and both shapes; with strict, missing or
// unexpected keys throw too (listing them) before anything is copied.
LoadReport load_state_dict(torch::nn::Module& module, const StateDict& state, bool strict = true);

// The usual path from files to a model: load a checkpoint (safetensors shards
// or an index, or a PyTorch .pt/.pth/.bin: see checkpoint.h), remap the keys,
// load strictly (by default). Safetensors keys are used as they are; a
// PyTorch file is unwrapped ({"state_dict": ...}) and, when mapping.prefix is
// empty, its common prefix (module., model., ...) stripped.
// `adapt`, when given, turns the remapped state dict into the module's own
// layout first (e.g. another library's key names, a resampled position table).
LoadReport load_weights(torch::nn::Module& module, const std::vector<std::string>& files, const KeyMapping& mapping = {},
                        bool strict = true, const std::function<StateDict(StateDict)>& adapt = nullptr);

// load_weights in two halves, so that the files can be read while the module is built (on another thread):
// read_weights reads and remaps as load_weights does; apply_weights adapts and loads what it read, naming
// `files` in its errors. On a GPU `device`, the tensors go there as they are read (CheckpointOptions::device).
StateDict read_weights(const std::vector<std::string>& files, const KeyMapping& mapping = {},
                       const torch::Device& device = torch::kCPU);
LoadReport apply_weights(torch::nn::Module& module, StateDict state, const std::vector<std::string>& files, bool strict = true,
                         const std::function<StateDict(StateDict)>& adapt = nullptr);

// The module's own state dict (parameters then buffers, by name), e.g. to save it.
StateDict state_dict(const torch::nn::Module& module);

}  // namespace tessera::models
