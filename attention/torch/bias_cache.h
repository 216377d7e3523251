// Packed copies of constant bias terms kept across calls (a Swin shift mask, a padding mask
// built once): the CUDA passes read a term in fragment order, and repacking an 85 MB mask costs
// the Swin d16 window attention 0.13 ms of its 2.7 ms per forward + backward.
//
// An entry belongs to one source view (its storage, held weakly, offset, sizes and strides),
// one autograd version of it and one signature (the pass, sizes, dtype, device and stream the
// copy was made for). An in-place change of the source bumps its version and misses; a freed
// source expires its entries. Writes that bypass the version counter (through .data, or raw
// pointers) are not seen: the same contract as autograd's saved tensors.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <vector>

namespace tessera::torch_ops::detail {

class PackedBiasCache {
 public:
  PackedBiasCache(size_t max_bytes, size_t max_entries) : max_bytes_(max_bytes), max_entries_(max_entries) {}

  // The copy of `src` for `signature`: a cached one, or a new `bytes`-byte buffer (options:
  // device and dtype kByte) filled by make(buffer) and kept. Callers decide what may be cached.
  at::Tensor get(const at::Tensor& src, const std::vector<int64_t>& signature, size_t bytes,
                 const at::TensorOptions& options, const std::function<void(void*)>& make);

  size_t entries() const;
  size_t bytes() const;
  void clear();

 private:
  struct Entry {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    const c10::StorageImpl* storage_id;
    std::vector<int64_t> view;  // storage offset, dtype, sizes, strides
    int64_t version;            // autograd's version counter of the source (shared by its views)
    std::vector<int64_t> signature;
    at::Tensor packed;
  };
  static std::vector<int64_t> view_of(const at::Tensor& src);
  void prune_locked();  // drops expired entries, then the least recently used past the limits

  size_t max_bytes_, max_entries_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  size_t bytes_ = 0;
};

// The process's cache (1 GiB, 16 entries); TESSERA_BIAS_CACHE=0 in the environment turns it off.
PackedBiasCache* bias_cache();

}  // namespace tessera::torch_ops::detail
