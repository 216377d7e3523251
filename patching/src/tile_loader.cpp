#include "tessera/patching/tile_loader.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace tessera::patching {

at::Tensor normalise_tile(const io::RgbImage& tile, const std::array<float, 3>& mean, const std::array<float, 3>& std) {
  at::Tensor hwc = at::from_blob(const_cast<uint8_t*>(tile.rgb.data()), {tile.height, tile.width, 3}, at::kByte);
  at::Tensor chw = hwc.permute({2, 0, 1}).to(at::kFloat).div_(255.f);
  const at::Tensor m = at::tensor(std::vector<float>(mean.begin(), mean.end())).view({3, 1, 1});
  const at::Tensor s = at::tensor(std::vector<float>(std.begin(), std.end())).view({3, 1, 1});
  return chw.sub_(m).div_(s).contiguous();
}

TileLoader::TileLoader(const io::Slide& slide, const TileGrid& grid, const TileLoaderOptions& opts)
    : slide_(slide), grid_(grid), opts_(opts) {
  if (opts_.batch_size < 1) opts_.batch_size = 1;
  if (opts_.threads < 1) opts_.threads = 1;
  if (opts_.prefetch_batches < 1) opts_.prefetch_batches = 1;
  if (opts_.crop < 0 || opts_.crop > grid.tile_size)
    throw std::invalid_argument("tile loader: crop " + std::to_string(opts_.crop) + " does not fit " +
                                std::to_string(grid.tile_size) + "-pixel tiles");
  const int64_t n = static_cast<int64_t>(grid.coords.size());
  num_batches_ = (n + opts_.batch_size - 1) / opts_.batch_size;
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

TileBatch TileLoader::load(int64_t b) const {
  const int64_t first = b * opts_.batch_size;
  const int64_t last = std::min<int64_t>(first + opts_.batch_size, static_cast<int64_t>(grid_.coords.size()));
  TileBatch out;
  const int64_t side = opts_.crop > 0 ? opts_.crop : grid_.tile_size;
  // torchvision CenterCrop: offset round((size - crop) / 2), halves to even.
  const int64_t off = static_cast<int64_t>(std::nearbyint((grid_.tile_size - side) / 2.0));
  out.images = at::empty({last - first, 3, side, side}, at::kFloat);
  for (int64_t i = first; i < last; ++i) {
    const auto tile = normalise_tile(read_tile(slide_, grid_, static_cast<size_t>(i)), opts_.mean, opts_.std);
    out.images[i - first].copy_(tile.narrow(1, off, side).narrow(2, off, side));
    out.indices.push_back(i);
  }
  return out;
}

void TileLoader::work() {
  for (;;) {
    int64_t b;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Bounded memory: never load further than prefetch_batches past what was delivered.
      cv_.wait(lock, [&] {
        return stop_ || error_ || next_to_load_ >= num_batches_ || next_to_load_ < next_to_deliver_ + opts_.prefetch_batches;
      });
      if (stop_ || error_ || next_to_load_ >= num_batches_) return;
      b = next_to_load_++;
    }
    try {
      TileBatch batch = load(b);
      std::lock_guard<std::mutex> lock(mu_);
      ready_.emplace(b, std::move(batch));
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
  cv_.wait(lock, [&] { return error_ || ready_.count(next_to_deliver_); });
  if (error_) std::rethrow_exception(error_);
  auto it = ready_.find(next_to_deliver_);
  out = std::move(it->second);
  ready_.erase(it);
  ++next_to_deliver_;
  lock.unlock();
  cv_.notify_all();
  return true;
}

}  // namespace tessera::patching
