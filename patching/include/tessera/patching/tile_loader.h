// Batches of tiles for the tile encoder, read by several threads at once
// (one open Slide is safe to share) with at most `prefetch_batches` batches
// in memory ahead of the consumer, whatever the slide's size. Batches come
// out in grid order, centre-cropped when asked (torchvision's CenterCrop) and
// normalised (x/255 - mean) / std per channel.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "tessera/patching/slide_tiling.h"

namespace tessera::patching {

struct TileLoaderOptions {
  int batch_size = 64;
  int threads = 2;
  int prefetch_batches = 2;
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};  // ImageNet, as timm's ViTs and UNI use
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
  int crop = 0;  // centre crop side in pixels (at most the grid's tile_size); 0: none
};

struct TileBatch {
  at::Tensor images;             // [n, 3, S, S] float32, S = crop or the grid's tile_size
  std::vector<int64_t> indices;  // positions in TileGrid::coords
};

class TileLoader {
 public:
  TileLoader(const io::Slide& slide, const TileGrid& grid, const TileLoaderOptions& opts = {});
  ~TileLoader();
  TileLoader(const TileLoader&) = delete;
  TileLoader& operator=(const TileLoader&) = delete;

  // The next batch in order; false once every tile was delivered. Rethrows
  // the first error a reader thread met.
  bool next(TileBatch& out);
  int64_t num_batches() const { return num_batches_; }

 private:
  void work();
  TileBatch load(int64_t b) const;

  const io::Slide& slide_;
  const TileGrid& grid_;
  TileLoaderOptions opts_;
  int64_t num_batches_ = 0;
  int64_t next_to_load_ = 0, next_to_deliver_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::map<int64_t, TileBatch> ready_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> workers_;
};

// One tile as a normalised [3, S, S] float32 tensor (what the loader puts in a batch).
at::Tensor normalise_tile(const io::RgbImage& tile, const std::array<float, 3>& mean, const std::array<float, 3>& std);

}  // namespace tessera::patching
