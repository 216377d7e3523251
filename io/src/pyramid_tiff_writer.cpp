#include <tiffio.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <vector>

#include "parallel_for.h"
#include "tessera/io/atomic_file.h"
#include "tessera/io/pyramid_tiff.h"

namespace tessera::io {
namespace {

RgbImage halve(const RgbImage& in) {
  RgbImage out(in.width / 2, in.height / 2);
  for (int y = 0; y < out.height; ++y)
    for (int x = 0; x < out.width; ++x)
      for (int c = 0; c < 3; ++c) {
        const int sum = in.pixel(2 * x, 2 * y)[c] + in.pixel(2 * x + 1, 2 * y)[c] + in.pixel(2 * x, 2 * y + 1)[c] +
                        in.pixel(2 * x + 1, 2 * y + 1)[c];
        out.pixel(x, y)[c] = static_cast<std::uint8_t>((sum + 2) / 4);
      }
  return out;
}

// Fills one t x t tile whose top-left pixel is (tx, ty); edge tiles are padded with white by the caller.
using TileSource = std::function<void(int tx, int ty, int w, int h, std::uint8_t* tile)>;

void write_level(TIFF* tif, int width, int height, const TileSource& source, const PyramidTiffOptions& o,
                 const std::string& description, const std::string& path) {
  const int t = o.tile_size;
  TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, static_cast<uint32_t>(width));
  TIFFSetField(tif, TIFFTAG_IMAGELENGTH, static_cast<uint32_t>(height));
  TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
  TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 3);
  TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_RGB);
  TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
  // Lossless, so tests can compare pixels exactly; compressed here (zlib, as libtiff's deflate codec
  // writes it) so that a row of tiles is compressed by several threads.
  TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_ADOBE_DEFLATE);
  TIFFSetField(tif, TIFFTAG_TILEWIDTH, static_cast<uint32_t>(t));
  TIFFSetField(tif, TIFFTAG_TILELENGTH, static_cast<uint32_t>(t));
  TIFFSetField(tif, TIFFTAG_IMAGEDESCRIPTION, description.c_str());
  const int across = (width + t - 1) / t;
  const std::size_t raw = static_cast<std::size_t>(t) * t * 3;
  std::vector<std::vector<std::uint8_t>> packed(across);
  for (int ty = 0; ty < height; ty += t) {
    detail::parallel_for(across, o.threads, [&](size_t i) {
      thread_local std::vector<std::uint8_t> tile;
      tile.assign(raw, 255);
      const int tx = int(i) * t, w = std::min(t, width - tx), h = std::min(t, height - ty);
      source(tx, ty, w, h, tile.data());
      uLongf size = compressBound(static_cast<uLong>(raw));
      packed[i].resize(size);
      if (compress2(packed[i].data(), &size, tile.data(), static_cast<uLong>(raw), Z_BEST_SPEED) != Z_OK) size = 0;
      packed[i].resize(size);
    });
    for (int i = 0; i < across; ++i) {
      if (packed[i].empty()) throw std::runtime_error(path + ": cannot compress a tile");
      const ttile_t index = TIFFComputeTile(tif, static_cast<uint32_t>(i * t), static_cast<uint32_t>(ty), 0, 0);
      if (TIFFWriteRawTile(tif, index, packed[i].data(), static_cast<tmsize_t>(packed[i].size())) < 0)
        throw std::runtime_error(path + ": cannot write tile");
    }
  }
  if (!TIFFWriteDirectory(tif)) throw std::runtime_error(path + ": cannot finish TIFF directory");
}

void check_options(const std::string& path, int width, int height, const PyramidTiffOptions& o) {
  if (width <= 0 || height <= 0) throw std::invalid_argument(path + ": image is empty");
  if (o.tile_size <= 0 || o.tile_size % 16) throw std::invalid_argument(path + ": tile size must be a multiple of 16");
  if (!(o.mpp > 0)) throw std::invalid_argument(path + ": mpp must be positive");
}

// Levels 0, 1, ... of width x height (each half the one above, floored) until the next would be
// smaller than min_level_size; `level_source(l, w, h)` gives level l's tiles.
void write_levels(const std::string& path, int width, int height, const PyramidTiffOptions& o,
                  const std::function<TileSource(int, int, int)>& level_source) {
  write_atomically(path, [&](const std::string& tmp) {
    // libtiff reports errors through a handler that prints; we check return values instead.
    TIFFSetErrorHandler(nullptr);
    TIFFSetWarningHandler(nullptr);
    const bool big = static_cast<double>(width) * height > double(1 << 28);  // BigTIFF offsets
    std::unique_ptr<TIFF, void (*)(TIFF*)> tif(TIFFOpen(tmp.c_str(), big ? "w8" : "w"), TIFFClose);
    if (!tif) throw std::runtime_error(path + ": cannot create TIFF file");
    int w = width, h = height;
    for (int l = 0;; ++l) {
      char desc[512];
      // Aperio's description format: OpenSlide's aperio driver parses the
      // "key = value" fields after '|' into aperio.* properties and takes
      // MPP and AppMag from them.
      std::snprintf(desc, sizeof desc,
                    "Aperio Image Library v12.0.0 (tessera sample)\r\n%dx%d [0,0 %dx%d] (%dx%d) RGB deflate%s|AppMag = "
                    "%g|MPP = %.6g|Filename = tessera-sample",
                    width, height, w, h, o.tile_size, o.tile_size, l == 0 ? "" : " -> downsampled", o.objective_power, o.mpp);
      if (o.resolution_tags) {
        // Pixels per centimetre at this level, for readers that use the tags.
        const double px_per_cm = 1e4 / (o.mpp * (1 << l));
        TIFFSetField(tif.get(), TIFFTAG_RESOLUTIONUNIT, RESUNIT_CENTIMETER);
        TIFFSetField(tif.get(), TIFFTAG_XRESOLUTION, static_cast<float>(px_per_cm));
        TIFFSetField(tif.get(), TIFFTAG_YRESOLUTION, static_cast<float>(px_per_cm));
      }
      write_level(tif.get(), w, h, level_source(l, w, h), o, o.aperio_description ? desc : "tessera sample slide", path);
      if (w / 2 < o.min_level_size || h / 2 < o.min_level_size) break;
      w /= 2, h /= 2;
    }
  });
}

}  // namespace

void write_pyramid_tiff(const std::string& path, const RgbImage& image, const PyramidTiffOptions& o) {
  check_options(path, image.width, image.height, o);
  if (image.rgb.size() != static_cast<std::size_t>(image.width) * image.height * 3)
    throw std::invalid_argument(path + ": the image's buffer does not match its size");
  RgbImage level;
  write_levels(path, image.width, image.height, o, [&](int l, int, int) -> TileSource {
    if (l > 0) level = halve(l == 1 ? image : level);
    const RgbImage& img = l == 0 ? image : level;
    return [&img, t = o.tile_size](int tx, int ty, int w, int h, std::uint8_t* tile) {
      for (int y = 0; y < h; ++y) std::copy_n(img.pixel(tx, ty + y), w * 3, tile + static_cast<std::size_t>(y) * t * 3);
    };
  });
}

void write_pyramid_tiff(const std::string& path, int width, int height, const RegionRenderer& render, const PyramidTiffOptions& o) {
  check_options(path, width, height, o);
  write_levels(path, width, height, o, [&](int l, int, int) -> TileSource {
    return [&render, scale = 1 << l, t = o.tile_size](int tx, int ty, int w, int h, std::uint8_t* tile) {
      std::vector<std::uint8_t> region(static_cast<std::size_t>(w) * h * 3);
      render(scale, tx, ty, w, h, region.data());
      for (int y = 0; y < h; ++y)
        std::copy_n(region.data() + static_cast<std::size_t>(y) * w * 3, w * 3, tile + static_cast<std::size_t>(y) * t * 3);
    };
  });
}

}  // namespace tessera::io
