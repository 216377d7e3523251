// Patch features and coordinates in HDF5 with the Trident/CLAM schema, so
// files from tessera and from those tools are interchangeable:
//   /coords    int64   [N, 2]  top-left (x, y) of each patch in level-0 pixels
//   /features  float32 [N, D]
// Attributes on /coords (Trident's names): patch_size, patch_size_level0,
// level0_width, level0_height, target_mpp, level0_mpp, and when the mpp is
// known target_magnification / level0_magnification (10 / mpp, Trident's
// convention); on /features: encoder, name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::io {

struct PatchFeatures {
  std::int64_t n = 0, dim = 0;
  std::vector<std::int64_t> coords;  // n * 2, row-major (x, y)
  std::vector<float> features;       // n * dim, row-major
  std::int64_t patch_size = 0;         // pixels at the target mpp
  std::int64_t patch_size_level0 = 0;  // the same patch in level-0 pixels
  std::int64_t level0_width = 0, level0_height = 0;
  double target_mpp = 0, level0_mpp = 0;
  std::string encoder;  // e.g. "uni_v1"
  std::string name;     // slide name
};

// Validates shapes (coords n*2, features n*dim, sizes positive) and writes
// the file atomically. Throws naming `path` on any error.
void write_patch_features(const std::string& path, const PatchFeatures& f);
// Reads a file in this schema (tessera's, Trident's, or CLAM's: coords may
// be int32; features any float type; missing attributes stay 0/empty).
PatchFeatures read_patch_features(const std::string& path);

}  // namespace tessera::io
