// A restricted pickle reader for the data.pkl of PyTorch checkpoints: it
// understands the opcodes a tensor state dict is written with (protocol 2,
// plus the protocol-4 framing ones) and builds a tree of plain values. It
// never imports or calls anything: GLOBAL / STACK_GLOBAL are accepted only
// for an allow-list (collections.OrderedDict, torch._utils._rebuild_tensor_v2,
// _rebuild_parameter[_with_state], torch.*Storage, torch dtypes) and REDUCE
// only "applies" those few by building the value they would return. Any
// other global (os.system, builtins.eval, ...) and any other opcode (INST,
// OBJ, NEWOBJ, EXT*, ...) is a FormatError naming the construct. No LibTorch.
//
// Opcodes: CPython Lib/pickletools.py; tensors: torch/_utils.py and
// torch/serialization.py (persistent ids of storages).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/models/format_error.h"
#include "tessera/models/safetensors_header.h"

namespace tessera::models::pickle {

enum class Kind : uint8_t { None, Bool, Int, Float, String, List, Tuple, Dict, Global, Storage, Tensor };
const char* kind_name(Kind k);

// A storage named by a persistent id ('storage', torch.FloatStorage, key, location, numel):
// its bytes are the archive record data/<key>.
struct Storage {
  safetensors::DType dtype = safetensors::DType::F32;
  std::string key, location;
  uint64_t numel = 0;  // elements of dtype
};

// What torch._utils._rebuild_tensor_v2 would make: a strided view of a storage.
struct Tensor {
  std::size_t storage = 0;  // index into Tree::storages
  uint64_t offset = 0;      // in elements
  std::vector<int64_t> sizes, strides;
};

struct Node {
  Kind kind = Kind::None;
  int64_t i = 0;                   // Bool, Int; Storage / Tensor: index into Tree::storages / tensors
  double f = 0;                    // Float
  std::string s;                   // String; Global: "module.name"
  std::vector<std::size_t> items;  // List, Tuple: elements; Dict: key, value, key, value, ... in insertion order
};

struct Tree {
  std::vector<Node> nodes;
  std::vector<Storage> storages;
  std::vector<Tensor> tensors;
  std::size_t root = 0;
  const Node& at(std::size_t i) const { return nodes.at(i); }
};

// Bounds what a hostile file can make the reader allocate.
constexpr std::size_t kMaxNodes = 16u << 20;

// Parses a whole pickle; `source` starts every error message ("model.pt: data.pkl").
Tree parse(const unsigned char* data, std::size_t size, const std::string& source);

}  // namespace tessera::models::pickle
