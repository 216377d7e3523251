// Whole-slide images through OpenSlide (Aperio SVS, Hamamatsu NDPI/VMS,
// MIRAX, Leica SCN, Philips/Ventana TIFF, generic tiled TIFF...).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/io/rgb_image.h"

namespace tessera::io {

struct SlideLevel {
  std::int64_t width = 0, height = 0;
  double downsample = 1;  // relative to level 0
};

struct SlideInfo {
  std::string path;
  std::string vendor;                  // "aperio", "generic-tiff", ...
  std::vector<SlideLevel> levels;      // level 0 first
  double mpp_x = 0, mpp_y = 0;         // microns per level-0 pixel; 0 when unknown
  std::string mpp_source;              // which property (or fallback) gave the mpp
  double objective_power = 0;          // 0 when the slide does not say
  std::vector<std::string> associated; // "label", "macro", "thumbnail", ...
  std::map<std::string, std::string> properties;  // every OpenSlide property
};

struct SlideOpenOptions {
  // Used when the slide carries no mpp of its own (many generic TIFFs):
  // > 0 takes precedence over guessing it from the objective power.
  double fallback_mpp = 0;
};

// An open slide. All member functions are safe to call from several threads
// at once (OpenSlide guarantees it for everything but close, which only the
// destructor calls), so one Slide can serve a parallel tile loader.
class Slide {
 public:
  explicit Slide(const std::string& path, const SlideOpenOptions& options = {});
  ~Slide();
  Slide(Slide&&) noexcept;
  Slide& operator=(Slide&&) noexcept;
  Slide(const Slide&) = delete;
  Slide& operator=(const Slide&) = delete;

  const SlideInfo& info() const { return info_; }
  int level_count() const { return static_cast<int>(info_.levels.size()); }
  // Microns per pixel at `level` (0 when the slide's mpp is unknown).
  double level_mpp(int level) const;

  // Straight RGB of the w x h region whose top-left is (x, y) in level-0
  // pixels, read at `level`. Areas without data (outside the scan, or
  // transparent) come back white.
  RgbImage read_region(std::int64_t x, std::int64_t y, int level, std::int64_t w, std::int64_t h) const;

  // The coarsest level whose resolution is at least as fine as target_mpp
  // (within 10 %, as Trident rounds), so tiles are read there and scaled
  // down by level_mpp / target_mpp <= 1.1. Throws when the mpp is unknown.
  int best_level_for_mpp(double target_mpp) const;

  RgbImage read_associated(const std::string& name) const;

 private:
  struct Handle;
  std::unique_ptr<Handle> h_;
  SlideInfo info_;
};

}  // namespace tessera::io
