#include "bias_cache.h"

#include <cstdlib>
#include <cstring>

namespace tessera::torch_ops::detail {

std::vector<int64_t> PackedBiasCache::view_of(const at::Tensor& src) {
  std::vector<int64_t> v{src.storage_offset(), static_cast<int64_t>(src.scalar_type()), src.dim()};
  for (int64_t d = 0; d < src.dim(); ++d) {
    v.push_back(src.size(d));
    v.push_back(src.stride(d));
  }
  return v;
}

at::Tensor PackedBiasCache::get(const at::Tensor& src, const std::vector<int64_t>& signature, size_t bytes,
                                const at::TensorOptions& options, const std::function<void(void*)>& make) {
  const c10::StorageImpl* id = src.storage().unsafeGetStorageImpl();
  const std::vector<int64_t> view = view_of(src);
  const int64_t version = static_cast<int64_t>(src._version());
  {
    std::lock_guard<std::mutex> lock(mu_);
    prune_locked();
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if (it->storage_id != id || it->view != view || it->signature != signature) continue;
      if (it->version == version && it->packed.numel() == static_cast<int64_t>(bytes)) {
        lru_.splice(lru_.begin(), lru_, it);
        return lru_.front().packed;
      }
      bytes_ -= static_cast<size_t>(it->packed.numel());  // the source changed: its old copy goes
      lru_.erase(it);
      break;
    }
  }
  at::Tensor packed = at::empty({static_cast<int64_t>(bytes)}, options.dtype(at::kByte));
  make(packed.data_ptr());
  std::lock_guard<std::mutex> lock(mu_);
  lru_.push_front(Entry{src.storage().getWeakStorageImpl(), id, view, version, signature, packed});
  bytes_ += bytes;
  prune_locked();
  return packed;
}

void PackedBiasCache::prune_locked() {
  for (auto it = lru_.begin(); it != lru_.end();) {
    // expired(): the source's storage was freed (its address may hold another tensor by now)
    if (it->storage.expired()) {
      bytes_ -= static_cast<size_t>(it->packed.numel());
      it = lru_.erase(it);
    } else {
      ++it;
    }
  }
  // the newest entry stays even past the limits: the call that made it is about to read it
  while (lru_.size() > 1 && (bytes_ > max_bytes_ || lru_.size() > max_entries_)) {
    bytes_ -= static_cast<size_t>(lru_.back().packed.numel());
    lru_.pop_back();
  }
}

size_t PackedBiasCache::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

size_t PackedBiasCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

void PackedBiasCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  lru_.clear();
  bytes_ = 0;
}

PackedBiasCache* bias_cache() {
  // Never destroyed: CUDA tensors freed from a static destructor may outlive the runtime.
  static PackedBiasCache* const cache = [] {
    const char* env = std::getenv("TESSERA_BIAS_CACHE");
    return env && std::strcmp(env, "0") == 0 ? nullptr : new PackedBiasCache(size_t(1) << 30, 16);
  }();
  return cache;
}

}  // namespace tessera::torch_ops::detail
