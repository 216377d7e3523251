// From a whole-slide image to tiles, with Trident/CLAM behaviour:
//  1. tissue mask on a low-resolution level: saturation channel (HSV),
//     median blur, Otsu threshold, morphological closing, islands smaller
//     than min_island_area and holes smaller than max_hole_area removed
//     (areas in level-0 µm², so the result does not depend on the level);
//  2. a grid of tile_size × tile_size tiles at target_mpp, laid over level 0
//     (coordinates are level-0 top-left pixels), kept when at least
//     min_tissue_fraction of the tile's footprint is tissue;
//  3. tiles read from the coarsest level at or finer than target_mpp and
//     resized to tile_size (area interpolation).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/io/rgb_image.h"
#include "tessera/io/slide.h"

namespace tessera::patching {

struct TissueOptions {
  int max_mask_side = 2048;        // the mask level is the finest with both sides <= this
  int median_blur = 7;             // odd kernel size
  int close_kernel = 4;            // pixels at the mask level
  double min_island_area_um2 = 2.5e5;   // ~ a 500 µm square: dust and pen dots go
  double max_hole_area_um2 = 4.0e4;     // holes smaller than ~200 µm square are filled
};

struct TissueMask {
  std::vector<uint8_t> mask;   // 1 = tissue, row-major at the mask level
  int width = 0, height = 0;
  int level = 0;
  double downsample = 1;       // level-0 pixels per mask pixel
  uint8_t otsu_threshold = 0;  // on saturation (0..255)
  double tissue_fraction() const;
};

TissueMask detect_tissue(const io::Slide& slide, const TissueOptions& opts = {});

// A tile whose side at its read level is within this fraction of a whole multiple of the tile size is read at
// that multiple: the scanner's nominal magnification (a 40× slide at 0.2525 µm/px gives 0.5 µm/px tiles from
// 448 px, as magnification-based patching such as Trident's does, not from 444), and a whole-factor downsampling
// is a box filter, far cheaper than a fractional one.
inline constexpr double kWholeFactorTolerance = 0.02;

struct TileGridOptions {
  double target_mpp = 0.5;
  int tile_size = 224;            // pixels at target_mpp
  double min_tissue_fraction = 0.5;
};

struct TileGrid {
  std::vector<std::array<int64_t, 2>> coords;  // level-0 top-left (x, y)
  int64_t tile_size_level0 = 0;                // footprint side in level-0 pixels (see kWholeFactorTolerance)
  int tile_size = 0;                           // output side in pixels
  double target_mpp = 0;
  int read_level = 0;                          // where tiles are read
  int64_t read_size = 0;                       // side read at read_level before resizing
  int64_t grid_cols = 0, grid_rows = 0;        // the full grid the kept tiles come from
};

TileGrid make_tile_grid(const io::Slide& slide, const TissueMask& tissue, const TileGridOptions& opts = {});

// One tile, as the encoder sees it before normalisation.
io::RgbImage read_tile(const io::Slide& slide, const TileGrid& grid, size_t index);

// A picture of the slide with the tissue contour (green) and kept tiles
// (blue), as PNG bytes; write it with io::write_file_atomically.
std::string tiling_thumbnail_png(const io::Slide& slide, const TissueMask& tissue, const TileGrid& grid,
                                 int max_side = 1024);

}  // namespace tessera::patching
