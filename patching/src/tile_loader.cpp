#include "tessera/patching/tile_loader.h"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tessera::patching {

at::Tensor normalise_tiles(const at::Tensor& images, const std::array<float, 3>& mean, const std::array<float, 3>& std,
                           at::ScalarType dtype) {
  if (images.dim() != 4 || images.size(3) != 3 || images.scalar_type() != at::kByte)
    throw std::invalid_argument("normalise_tiles: expected [n, S, S, 3] uint8 tiles");
  // Per channel with scalars: no host-to-device copy of mean / std, whose pageable transfer would wait for the GPU.
  at::Tensor x = images.permute({0, 3, 1, 2}).to(at::kFloat);
  for (int c = 0; c < 3; ++c) x.select(1, c).div_(255.f).sub_(mean[c]).div_(std[c]);
  return x.to(dtype).contiguous();
}

at::Tensor normalise_tile(const io::RgbImage& tile, const std::array<float, 3>& mean, const std::array<float, 3>& std) {
  at::Tensor hwc = at::from_blob(const_cast<uint8_t*>(tile.rgb.data()), {1, tile.height, tile.width, 3}, at::kByte);
  return normalise_tiles(hwc, mean, std)[0];
}

TileLoader::TileLoader(const io::Slide& slide, const TileGrid& grid, const TileLoaderOptions& opts)
    : slide_(slide), grid_(grid), opts_(opts) {
  if (opts_.batch_size < 1) opts_.batch_size = 1;
  if (opts_.threads < 1) opts_.threads = 1;
  if (opts_.prefetch_batches < 1) opts_.prefetch_batches = 1;
  if (opts_.crop < 0 || opts_.crop > grid.tile_size)
    throw std::invalid_argument("tile loader: crop " + std::to_string(opts_.crop) + " does not fit " +
                                std::to_string(grid.tile_size) + "-pixel tiles");
  side_ = opts_.crop > 0 ? opts_.crop : grid_.tile_size;
  // torchvision CenterCrop: offset round((size - crop) / 2), halves to even.
  offset_ = static_cast<int64_t>(std::nearbyint((grid_.tile_size - side_) / 2.0));
  num_tiles_ = static_cast<int64_t>(grid.coords.size());
  num_batches_ = (num_tiles_ + opts_.batch_size - 1) / opts_.batch_size;
  for (int t = 0; t < opts_.threads; ++t) workers_.emplace_back([this] { work(); });
}

TileLoader::~TileLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

TileLoader::Pending TileLoader::allocate(int64_t b) const {
  const int64_t first = b * opts_.batch_size, count = std::min<int64_t>(opts_.batch_size, num_tiles_ - first);
  Pending p;
  p.batch.images = at::empty({count, side_, side_, 3}, at::TensorOptions().dtype(at::kByte).pinned_memory(opts_.pin_memory));
  for (int64_t i = 0; i < count; ++i) p.batch.indices.push_back(first + i);
  p.remaining = count;
  return p;
}

void TileLoader::work() {
  for (;;) {
    int64_t i;
    at::Tensor images;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Bounded memory: never read a tile of a batch prefetch_batches past the one to deliver.
      cv_.wait(lock, [&] {
        return stop_ || error_ || next_tile_ >= num_tiles_ || next_tile_ / opts_.batch_size < next_to_deliver_ + opts_.prefetch_batches;
      });
      if (stop_ || error_ || next_tile_ >= num_tiles_) return;
      i = next_tile_++;
      const int64_t b = i / opts_.batch_size;
      try {
        if (!pending_.count(b)) pending_.emplace(b, allocate(b));
      } catch (...) {
        if (!error_) error_ = std::current_exception();
        cv_.notify_all();
        return;
      }
      images = pending_.at(b).batch.images;
    }
    try {
      const io::RgbImage tile = read_tile(slide_, grid_, static_cast<size_t>(i));
      if (tile.width != grid_.tile_size || tile.height != grid_.tile_size)
        throw std::runtime_error("tile loader: tile " + std::to_string(i) + " came back " + std::to_string(tile.width) + "x" +
                                 std::to_string(tile.height) + ", not " + std::to_string(grid_.tile_size) + " pixels square");
      auto* dst = images[i % opts_.batch_size].data_ptr<uint8_t>();
      for (int64_t y = 0; y < side_; ++y)
        std::memcpy(dst + y * side_ * 3, tile.rgb.data() + ((y + offset_) * tile.width + offset_) * 3, static_cast<size_t>(side_) * 3);
      std::lock_guard<std::mutex> lock(mu_);
      --pending_.at(i / opts_.batch_size).remaining;
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
    cv_.notify_all();
  }
}

bool TileLoader::next(TileBatch& out) {
  std::unique_lock<std::mutex> lock(mu_);
  if (next_to_deliver_ >= num_batches_) return false;
  cv_.wait(lock, [&] {
    if (error_) return true;
    auto it = pending_.find(next_to_deliver_);
    return it != pending_.end() && it->second.remaining == 0;
  });
  if (error_) std::rethrow_exception(error_);
  auto it = pending_.find(next_to_deliver_);
  out = std::move(it->second.batch);
  pending_.erase(it);
  ++next_to_deliver_;
  lock.unlock();
  cv_.notify_all();
  return true;
}

}  // namespace tessera::patching
