// Writing a pyramidal tiled TIFF in the Aperio SVS layout, which OpenSlide
// 3.4 opens as vendor "aperio" with openslide.mpp-x/y and objective power
// taken from the ImageDescription (its generic-tiff driver reports no mpp).
// Used for the project's own sample slide.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "tessera/io/rgb_image.h"

namespace tessera::io {

struct PyramidTiffOptions {
  double mpp = 0.5;          // microns per level-0 pixel
  double objective_power = 20;
  int tile_size = 256;       // multiple of 16 (TIFF requirement)
  int min_level_size = 512;  // stop adding levels when the next would be smaller
  // false: a plain tiled TIFF (OpenSlide's "generic-tiff"), which carries
  // no mpp for OpenSlide 3.4; used to test the mpp fallbacks.
  bool aperio_description = true;
  bool resolution_tags = true;  // X/YResolution in pixels per centimetre
  int threads = 1;              // tiles drawn and compressed at once
};

// Level 0 is `image`; each further level halves it (2x2 mean) until it
// would be smaller than min_level_size. Written atomically; throws naming
// `path` on any libtiff error.
void write_pyramid_tiff(const std::string& path, const RgbImage& image, const PyramidTiffOptions& options = {});

// Draws the w x h region at (x, y) of the image shrunk `scale` times as row-major RGB into rgb
// (io::SampleSlide::render); called from several threads at once.
using RegionRenderer = std::function<void(int scale, int x, int y, int w, int h, std::uint8_t* rgb)>;

// A width x height image too large to hold: level l (sizes as above) is drawn by `render` at scale
// 2^l, tile by tile; memory is bounded by a row of tiles.
void write_pyramid_tiff(const std::string& path, int width, int height, const RegionRenderer& render,
                        const PyramidTiffOptions& options = {});

}  // namespace tessera::io
