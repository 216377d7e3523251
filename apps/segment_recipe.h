// The `inference:` section of a Swin UNETR config: a model bundle's
// preprocessing and inference recipe under MONAI's transform names, which
// `tessera segment` applies where its command line does not say otherwise.
//
//   inference:
//     orientation: {axcodes: RAS}                         # Orientationd
//     spacing: {pixdim: [1.5, 1.5, 2.0], mode: bilinear}  # Spacingd
//     scale_intensity_range: {a_min: -175, a_max: 250, b_min: 0, b_max: 1, clip: true}
//     sliding_window: {roi_size: [96, 96, 96], sw_batch_size: 4, overlap: 0.5, mode: constant}
//     invert: {nearest_interp: false}                     # Invertd of the softmax
//     labels: [background, spleen, ...]
// Every key is optional; an unknown one is an error naming the file.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tessera::apps {

struct SegmentRecipe {
  std::optional<std::vector<double>> pixdim;
  std::optional<std::string> spacing_mode;  // "bilinear" or "nearest"
  std::optional<double> a_min, a_max, b_min, b_max;
  std::optional<bool> clip;
  std::optional<std::vector<int64_t>> roi_size;
  std::optional<int> sw_batch_size;
  std::optional<double> overlap;
  std::optional<std::string> mode;        // "constant" or "gaussian"
  std::optional<bool> nearest_interp;     // Invertd: nearest (true) or the Spacing mode (false)
  std::vector<std::string> labels;
};

// Reads `inference:` from the config at `path` (an empty recipe when it has none).
SegmentRecipe read_segment_recipe(const std::string& path);

}  // namespace tessera::apps
