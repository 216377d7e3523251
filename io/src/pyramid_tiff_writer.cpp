#include <tiffio.h>

#include <algorithm>
#include <cstdio>
#include <vector>
#include <memory>
#include <stdexcept>

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

void write_level(TIFF* tif, const RgbImage& img, const PyramidTiffOptions& o, const std::string& description,
                 const std::string& path) {
  const int t = o.tile_size;
  TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, static_cast<uint32_t>(img.width));
  TIFFSetField(tif, TIFFTAG_IMAGELENGTH, static_cast<uint32_t>(img.height));
  TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
  TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 3);
  TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_RGB);
  TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
  // Lossless, so tests can compare pixels exactly.
  TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_ADOBE_DEFLATE);
  TIFFSetField(tif, TIFFTAG_TILEWIDTH, static_cast<uint32_t>(t));
  TIFFSetField(tif, TIFFTAG_TILELENGTH, static_cast<uint32_t>(t));
  TIFFSetField(tif, TIFFTAG_IMAGEDESCRIPTION, description.c_str());
  std::vector<std::uint8_t> tile(static_cast<std::size_t>(t) * t * 3);
  for (int ty = 0; ty < img.height; ty += t)
    for (int tx = 0; tx < img.width; tx += t) {
      std::fill(tile.begin(), tile.end(), 255);  // edge tiles padded with white
      for (int y = 0; y < t && ty + y < img.height; ++y) {
        const int w = std::min(t, img.width - tx);
        std::copy_n(img.pixel(tx, ty + y), w * 3, tile.data() + static_cast<std::size_t>(y) * t * 3);
      }
      if (TIFFWriteTile(tif, tile.data(), static_cast<uint32_t>(tx), static_cast<uint32_t>(ty), 0, 0) < 0)
        throw std::runtime_error(path + ": cannot write tile");
    }
  if (!TIFFWriteDirectory(tif)) throw std::runtime_error(path + ": cannot finish TIFF directory");
}

}  // namespace

void write_pyramid_tiff(const std::string& path, const RgbImage& image, const PyramidTiffOptions& o) {
  if (image.width <= 0 || image.height <= 0 || image.rgb.size() != static_cast<std::size_t>(image.width) * image.height * 3)
    throw std::invalid_argument(path + ": image is empty or its buffer does not match its size");
  if (o.tile_size <= 0 || o.tile_size % 16) throw std::invalid_argument(path + ": tile size must be a multiple of 16");
  if (!(o.mpp > 0)) throw std::invalid_argument(path + ": mpp must be positive");
  write_atomically(path, [&](const std::string& tmp) {
    // libtiff reports errors through a handler that prints; we check return values instead.
    TIFFSetErrorHandler(nullptr);
    TIFFSetWarningHandler(nullptr);
    std::unique_ptr<TIFF, void (*)(TIFF*)> tif(TIFFOpen(tmp.c_str(), image.width * image.height > (1 << 28) ? "w8" : "w"),
                                               TIFFClose);
    if (!tif) throw std::runtime_error(path + ": cannot create TIFF file");
    RgbImage level = image;
    for (int l = 0;; ++l) {
      char desc[512];
      // Aperio's description format: OpenSlide's aperio driver parses the
      // "key = value" fields after '|' into aperio.* properties and takes
      // MPP and AppMag from them.
      std::snprintf(desc, sizeof desc,
                    "Aperio Image Library v12.0.0 (tessera sample)\r\n%dx%d [0,0 %dx%d] (%dx%d) RGB deflate%s|AppMag = "
                    "%g|MPP = %.6g|Filename = tessera-sample",
                    image.width, image.height, level.width, level.height, o.tile_size, o.tile_size,
                    l == 0 ? "" : " -> downsampled", o.objective_power, o.mpp);
      if (o.resolution_tags) {
        // Pixels per centimetre at this level, for readers that use the tags.
        const double px_per_cm = 1e4 / (o.mpp * (1 << l));
        TIFFSetField(tif.get(), TIFFTAG_RESOLUTIONUNIT, RESUNIT_CENTIMETER);
        TIFFSetField(tif.get(), TIFFTAG_XRESOLUTION, static_cast<float>(px_per_cm));
        TIFFSetField(tif.get(), TIFFTAG_YRESOLUTION, static_cast<float>(px_per_cm));
      }
      write_level(tif.get(), level, o, o.aperio_description ? desc : "tessera sample slide", path);
      if (level.width / 2 < o.min_level_size || level.height / 2 < o.min_level_size) break;
      level = halve(level);
    }
  });
}

}  // namespace tessera::io
