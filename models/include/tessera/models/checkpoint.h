// One entry point for weights files, chosen by their content rather than
// their name: safetensors (one file, shards, a "*.index.json") and PyTorch's
// zip checkpoints (torch.save since 1.6: .bin, .pt, .pth, .ckpt, MONAI
// bundles' models/model.pt), read without Python and without running any
// pickle code (see pickle.h). Legacy (torch < 1.6) pickles and TorchScript
// archives are refused with how to convert them.
//
// A checkpoint is often more than a state dict: {"state_dict": ..., "epoch": 3},
// {"model": ..., "optimizer": ...}. Nested dicts become one flat StateDict
// with keys joined by '.'; non-tensor entries are skipped and reported.
#pragma once

#include <string>
#include <vector>

#include "tessera/models/safetensors.h"

namespace tessera::models {

enum class CheckpointFormat { kSafetensors, kSafetensorsIndex, kPyTorchZip, kPyTorchLegacy, kTorchScript, kUnknown };
const char* checkpoint_format_name(CheckpointFormat f);
// From the first bytes (and, for TorchScript, the archive's entries); never throws for content, only for I/O.
CheckpointFormat detect_checkpoint_format(const std::string& path);

struct CheckpointOptions {
  // The sub-dictionary to take, '.' for nesting ("state_dict", "model.module").
  // Empty: the whole file, unless `unwrap` finds the one wrapper below.
  std::string key;
  // With no key: when the top level is not itself a state dict and exactly one
  // of the usual wrappers (state_dict, model_state_dict, model, module, net,
  // network, network_weights) holds tensors, take it. PyTorch files only.
  bool unwrap = true;
  // Strip module. / model. / timm_model. / trunk. / encoder. (repeatedly)
  // when every key starts with it.
  bool strip_prefix = true;
  // Where the tensors land. A GPU gets them through page-locked chunks (torch_ops::DeviceFiller): no host copy of
  // the whole file, no pageable copy.
  torch::Device device = torch::kCPU;
};

struct CheckpointReport {
  CheckpointFormat format = CheckpointFormat::kUnknown;
  std::vector<std::string> files;    // after expanding an index
  std::string key;                   // sub-dictionary taken ("" = the whole file)
  bool key_from_unwrap = false;      // taken by the wrapper rule, not asked for
  std::string prefix;                // stripped from every key ("" = none)
  std::vector<std::string> skipped;  // entries left out, e.g. "epoch (int)", "optimizer (dict)"
  std::size_t tensors = 0;
  std::string summary() const;       // one line
};

// Loads every tensor of one checkpoint (a single path may be a shard index);
// several paths are shards of one checkpoint, merged (a name in two shards is
// an error naming both). Throws FormatError naming the file for anything
// malformed, refused or ambiguous.
StateDict load_checkpoint(const std::string& path, const CheckpointOptions& options = {},
                          CheckpointReport* report = nullptr);
StateDict load_checkpoint(const std::vector<std::string>& paths, const CheckpointOptions& options = {},
                          CheckpointReport* report = nullptr);

// The prefix strip_prefix would remove from these keys ("" when none).
std::string common_prefix(const StateDict& state);

}  // namespace tessera::models
