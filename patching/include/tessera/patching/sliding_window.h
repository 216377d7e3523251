// Sliding-window inference over N-d images with MONAI's parameters and
// meaning (monai.inferers.sliding_window_inference, MONAI 1.5):
//  - inputs smaller than the roi are padded (half before, the rest after,
//    constant cval) and the padding is cropped from the result;
//  - scan interval per dim = int(roi * (1 - overlap)), at least 1, and roi
//    itself where roi == size;
//  - window starts idx*interval, the last one pulled back to size - roi;
//  - blending: out += pred * w, count += w, out /= count, with w all ones
//    ("constant") or MONAI's Gaussian: per-dim exp(-x²/(2σ²)), x centred on
//    the window, σ = sigma_scale * roi, outer product, not normalised,
//    clamped below at max(min(w), 1e-3).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

namespace tessera::patching {

enum class BlendMode { constant, gaussian };

struct SlidingWindowOptions {
  std::vector<int64_t> roi_size;   // one per spatial dim; <= 0 means "the image size"
  int64_t sw_batch_size = 1;       // windows per predictor call
  std::vector<double> overlap = {0.25};  // one value, or one per spatial dim, each in [0, 1)
  BlendMode mode = BlendMode::constant;
  double sigma_scale = 0.125;
  double cval = 0.0;               // padding value for inputs smaller than the roi
  c10::optional<at::Device> sw_device;  // where windows run (default: the input's device)
  c10::optional<at::Device> device;     // where the result is stitched (default: the input's device)
  // Called after each predictor call with (windows done, windows total).
  std::function<void(int64_t, int64_t)> progress;
};

// Maps a batch of windows [n, C_in, *roi] to predictions [n, C_out, *roi].
using Predictor = std::function<at::Tensor(const at::Tensor&)>;

// input [B, C, *spatial] → [B, C_out, *spatial] (float32 on opts.device).
at::Tensor sliding_window_inference(const at::Tensor& input, const Predictor& predictor,
                                    const SlidingWindowOptions& opts);

// The pieces, exposed for tests and for callers that schedule windows themselves.
std::vector<int64_t> scan_interval(const std::vector<int64_t>& image_size, const std::vector<int64_t>& roi,
                                   const std::vector<double>& overlap);
// Start coordinates of every window, row-major over the spatial dims (last dim fastest).
std::vector<std::vector<int64_t>> window_starts(const std::vector<int64_t>& image_size,
                                                const std::vector<int64_t>& roi,
                                                const std::vector<int64_t>& interval);
// The per-window weight map [*roi], float32.
at::Tensor importance_map(const std::vector<int64_t>& roi, BlendMode mode, double sigma_scale,
                          const at::Device& device);

}  // namespace tessera::patching
