// Batches of tiles for the tile encoder, read by several threads at once
// (one open Slide is safe to share; the threads share the tiles of the next
// batches, so all of them work however large a batch is) with at most
// `prefetch_batches` batches in memory ahead of the consumer, whatever the
// slide's size. Batches come out in grid order as 8-bit RGB, centre-cropped
// when asked (torchvision's CenterCrop): a quarter of the bytes of floats to
// copy to a GPU, normalised there by normalise_tiles.
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
  int prefetch_batches = 3;
  int crop = 0;             // centre crop side in pixels (at most the grid's tile_size); 0: none
  bool pin_memory = false;  // page-locked batches (needs CUDA), so that copies to the GPU run asynchronously
};

struct TileBatch {
  at::Tensor images;             // [n, S, S, 3] uint8 RGB, S = crop or the grid's tile_size
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
  struct Pending {
    TileBatch batch;
    int64_t remaining = 0;  // tiles not yet written into batch.images
  };
  void work();
  Pending allocate(int64_t b) const;

  const io::Slide& slide_;
  const TileGrid& grid_;
  TileLoaderOptions opts_;
  int64_t num_tiles_ = 0, num_batches_ = 0, side_ = 0, offset_ = 0;
  int64_t next_tile_ = 0, next_to_deliver_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::map<int64_t, Pending> pending_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> workers_;
};

// [n, S, S, 3] uint8 RGB → [n, 3, S, S] (x/255 - mean) / std per channel, computed in float32 on the
// images' device, returned as `dtype`.
at::Tensor normalise_tiles(const at::Tensor& images, const std::array<float, 3>& mean, const std::array<float, 3>& std,
                           at::ScalarType dtype = at::kFloat);

// One tile as a normalised [3, S, S] float32 tensor.
at::Tensor normalise_tile(const io::RgbImage& tile, const std::array<float, 3>& mean, const std::array<float, 3>& std);

}  // namespace tessera::patching
