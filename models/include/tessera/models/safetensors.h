// Safetensors files as LibTorch tensors: one file, sharded checkpoints
// (several files, or a Hugging Face "*.safetensors.index.json"), and writing.
// Each tensor is read into its own freshly allocated tensor (no mmap aliasing,
// so misaligned offsets in a valid file are harmless): on the CPU, or on a GPU
// through page-locked chunks (torch_ops::DeviceFiller), never whole on the host.
#pragma once

#include <torch/types.h>

#include <map>
#include <string>
#include <vector>

#include "tessera/models/safetensors_header.h"
#include "tessera/torch/copy_stream.h"

namespace tessera::models {

// Name -> tensor, sorted by name (the order safetensors writes them).
using StateDict = std::map<std::string, torch::Tensor>;

namespace safetensors {

// An open, validated file: the header is parsed and checked against the
// file size on construction; tensors are read on demand.
class File {
 public:
  explicit File(std::string path);
  const std::string& path() const { return path_; }
  const Header& header() const { return header_; }
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return header_.find(name) != nullptr; }
  // Throws FormatError for a missing name, a dtype LibTorch lacks (U16/U32/U64,
  // F8) or a file that shrank since it was opened.
  torch::Tensor tensor(const std::string& name) const;
  // The same on `via`'s device, read through it.
  torch::Tensor tensor(const std::string& name, torch_ops::DeviceFiller& via) const;

 private:
  std::string path_;
  uint64_t file_size_ = 0;
  Header header_;
};

// All tensors of one file, on `device`.
StateDict load(const std::string& path, const torch::Device& device = torch::kCPU);
// All tensors of several shards; the same name in two shards is an error that
// names both files. A single path ending in ".index.json" is expanded to the
// shards its "weight_map" lists (relative to the index's folder).
StateDict load(const std::vector<std::string>& paths, const torch::Device& device = torch::kCPU);
std::map<std::string, std::string> metadata(const std::string& path);
// The shards a Hugging Face index ({"weight_map": {name: file}}) lists, in
// first-use order, as paths relative to the index's folder.
std::vector<std::string> shards_of_index(const std::string& index_path);

// Writes `tensors` (any device; copied to contiguous CPU) and `metadata`
// atomically: the file appears whole under `path` or not at all. The header
// is padded with spaces to a multiple of 8 bytes, as the reference writer does,
// so the data section is aligned.
void save(const std::string& path, const StateDict& tensors, const std::map<std::string, std::string>& metadata = {});

torch::ScalarType to_scalar_type(DType t, const std::string& where);
DType from_scalar_type(torch::ScalarType t, const std::string& where);

}  // namespace safetensors
}  // namespace tessera::models
