// The host side of `embed-wsi` alone: tiles/s of the tile loader (read, decode, resize, crop, batch) over a
// slide's tissue tiles, per reader-thread count, so that one can tell whether N cores feed an encoder's
// tiles/s. It reports speed; the tests check the tiles.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/io/slide.h"
#include "tessera/patching/slide_tiling.h"
#include "tessera/patching/tile_loader.h"

namespace tp = tessera::patching;

int main(int argc, char** argv) {
  CLI::App app("Tile loader throughput over a slide's tissue tiles");
  std::string path;
  std::vector<int> threads = {1, 2};
  int batch = 256, tile = 224, max_tiles = 0;
  double mpp = 0.5;
  app.add_option("slide", path, "Slide file")->required()->check(CLI::ExistingFile);
  app.add_option("--threads", threads, "Reader thread counts to time, each over the same tiles")->check(CLI::PositiveNumber);
  app.add_option("--batch", batch, "Tiles per batch")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--tile-size", tile, "Tile side in pixels")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--target-mpp", mpp, "Microns per pixel of the tiles")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--max-tiles", max_tiles, "Time only the first N tissue tiles (0: all)")->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    const auto p0 = std::chrono::steady_clock::now();
    const tessera::io::Slide slide(path);
    const tp::TissueMask tissue = tp::detect_tissue(slide);
    tp::TileGridOptions go;
    go.target_mpp = mpp;
    go.tile_size = tile;
    tp::TileGrid grid = tp::make_tile_grid(slide, tissue, go);
    const double prepare_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
    std::printf("%s: %zu tissue tiles of %d px at %.3g um/px, read at level %d as %lld px%s; opened, tissue and grid in %.2f s\n",
                path.c_str(), grid.coords.size(), tile, mpp, grid.read_level, static_cast<long long>(grid.read_size),
                grid.read_size == tile ? "" : " and resized", prepare_s);
    if (max_tiles > 0 && grid.coords.size() > static_cast<size_t>(max_tiles)) grid.coords.resize(max_tiles);
    std::printf("| reader threads | tiles | seconds | tiles/s | tiles/s per thread |\n|---|---|---|---|---|\n");
    for (const int t : threads) {
      tp::TileLoaderOptions lo;
      lo.batch_size = batch;
      lo.threads = t;
      const auto t0 = std::chrono::steady_clock::now();
      {
        tp::TileLoader loader(slide, grid, lo);
        tp::TileBatch b;
        while (loader.next(b)) {
        }
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double rate = grid.coords.size() / s;
      std::printf("| %d | %zu | %.2f | %.0f | %.0f |\n", t, grid.coords.size(), s, rate, rate / t);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_tile_loader: %s\n", e.what());
    return 1;
  }
  return 0;
}
