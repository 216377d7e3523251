// From a parsed data.pkl (pickle.h) to the names of a flat state dict: pick
// the sub-dictionary (asked for, or the one usual wrapper), flatten nested
// dicts and lists with '.', list what is not a tensor, and check every
// tensor's extent against its storage. No LibTorch: the fuzz target runs this.
#pragma once

#include <string>
#include <vector>

#include "tessera/models/pickle.h"

namespace tessera::models::pickle {

struct NamedTensor {
  std::string name;
  std::size_t tensor = 0;  // index into Tree::tensors
};

struct Selection {
  std::string key;                   // sub-dictionary taken, "" for the whole file
  bool from_unwrap = false;
  std::vector<NamedTensor> tensors;  // in the file's order
  std::vector<std::string> skipped;  // "epoch (int)", "optimizer (dict)", ...
};

// Checkpoint wrappers that hold the state dict (Lightning, DDP, timm/DINO scripts, nnU-Net, MONAI).
extern const char* const kWrapperKeys[7];

// `key`: '.'-separated path of dict keys ("" = top level). `unwrap`: with no
// key, take the one wrapper holding tensors when the top level holds none
// itself; two such wrappers are an error asking for a key.
Selection select_tensors(const Tree& tree, const std::string& key, bool unwrap, const std::string& source);

// Throws FormatError unless every element of the view (offset, sizes,
// strides) lies inside its storage's numel, without overflow.
void check_extent(const Tree& tree, const Tensor& t, const std::string& where);

}  // namespace tessera::models::pickle
