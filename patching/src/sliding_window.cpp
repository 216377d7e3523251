#include "tessera/patching/sliding_window.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace tessera::patching {
namespace {

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  std::ostringstream os;
  os << "sliding_window_inference: ";
  (os << ... << args);
  throw std::invalid_argument(os.str());
}

std::vector<at::indexing::TensorIndex> window_index(const std::vector<int64_t>& start,
                                                    const std::vector<int64_t>& roi) {
  std::vector<at::indexing::TensorIndex> idx = {at::indexing::Slice(), at::indexing::Slice()};
  for (size_t d = 0; d < start.size(); ++d) idx.emplace_back(at::indexing::Slice(start[d], start[d] + roi[d]));
  return idx;
}

}  // namespace

std::vector<int64_t> scan_interval(const std::vector<int64_t>& image_size, const std::vector<int64_t>& roi,
                                   const std::vector<double>& overlap) {
  std::vector<int64_t> out(roi.size());
  for (size_t d = 0; d < roi.size(); ++d) {
    const double ov = overlap.size() == 1 ? overlap[0] : overlap[d];
    if (roi[d] == image_size[d]) {
      out[d] = roi[d];
    } else {
      const int64_t iv = static_cast<int64_t>(static_cast<double>(roi[d]) * (1.0 - ov));
      out[d] = iv > 0 ? iv : 1;
    }
  }
  return out;
}

std::vector<std::vector<int64_t>> window_starts(const std::vector<int64_t>& image_size,
                                                const std::vector<int64_t>& roi,
                                                const std::vector<int64_t>& interval) {
  // Per dim: the first count d with d*interval + roi >= size, plus one; the
  // last start is pulled back so the window ends at the image border.
  std::vector<std::vector<int64_t>> per_dim(roi.size());
  for (size_t d = 0; d < roi.size(); ++d) {
    int64_t n = 0;
    while (n * interval[d] + roi[d] < image_size[d]) ++n;
    for (int64_t i = 0; i <= n; ++i) per_dim[d].push_back(std::min(i * interval[d], image_size[d] - roi[d]));
  }
  std::vector<std::vector<int64_t>> starts(1);
  for (size_t d = 0; d < roi.size(); ++d) {
    std::vector<std::vector<int64_t>> next;
    for (const auto& s : starts)
      for (int64_t v : per_dim[d]) {
        next.push_back(s);
        next.back().push_back(v);
      }
    starts.swap(next);
  }
  return starts;
}

at::Tensor importance_map(const std::vector<int64_t>& roi, BlendMode mode, double sigma_scale,
                          const at::Device& device) {
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  if (mode == BlendMode::constant) return at::ones(roi, opts);
  at::Tensor w;
  for (size_t d = 0; d < roi.size(); ++d) {
    const double n = static_cast<double>(roi[d]);
    const double sigma = sigma_scale * n;
    // x = -(n-1)/2 .. (n-1)/2, exactly centred, computed in double like MONAI's arange.
    at::Tensor x = at::arange(roi[d], at::TensorOptions().dtype(at::kDouble)) - (n - 1.0) / 2.0;
    at::Tensor g = at::exp(-(x * x) / (2.0 * sigma * sigma)).to(at::kFloat);
    std::vector<int64_t> shape(roi.size(), 1);
    shape[d] = roi[d];
    g = g.view(shape);
    w = w.defined() ? w * g : g;
  }
  w = w.expand(roi).contiguous();
  const float floor = std::max(w.min().item<float>(), 1e-3f);
  return w.clamp_min(floor).to(device);
}

at::Tensor sliding_window_inference(const at::Tensor& input, const Predictor& predictor,
                                    const SlidingWindowOptions& opts) {
  const int64_t nd = input.dim() - 2;
  if (nd < 1) fail("input must be [B, C, *spatial], got shape ", input.sizes());
  if (opts.roi_size.size() != static_cast<size_t>(nd))
    fail("roi_size has ", opts.roi_size.size(), " dims but the input has ", nd, " spatial dims");
  if (opts.sw_batch_size < 1) fail("sw_batch_size must be >= 1, got ", opts.sw_batch_size);
  if (opts.overlap.size() != 1 && opts.overlap.size() != static_cast<size_t>(nd))
    fail("overlap must have 1 or ", nd, " values, got ", opts.overlap.size());
  for (double o : opts.overlap)
    if (!(o >= 0.0 && o < 1.0)) fail("overlap must be in [0, 1), got ", o);
  if (opts.mode == BlendMode::gaussian && !(opts.sigma_scale > 0)) fail("sigma_scale must be > 0");

  const at::Device sw_device = opts.sw_device.value_or(input.device());
  const at::Device out_device = opts.device.value_or(input.device());
  std::vector<int64_t> image(input.sizes().begin() + 2, input.sizes().end());
  std::vector<int64_t> roi(nd);
  for (int64_t d = 0; d < nd; ++d) roi[d] = opts.roi_size[d] > 0 ? opts.roi_size[d] : image[d];

  // Pad inputs smaller than the roi: half before, the rest after (F.pad order is last dim first).
  std::vector<int64_t> pad(2 * nd, 0), padded(image);
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t diff = std::max<int64_t>(roi[d] - image[d], 0);
    pad[2 * (nd - 1 - d)] = diff / 2;
    pad[2 * (nd - 1 - d) + 1] = diff - diff / 2;
    padded[d] = image[d] + diff;
  }
  at::Tensor x = input;
  bool any_pad = false;
  for (int64_t p : pad) any_pad |= p > 0;
  if (any_pad) x = at::constant_pad_nd(input, pad, opts.cval);

  const auto interval = scan_interval(padded, roi, opts.overlap);
  const auto starts = window_starts(padded, roi, interval);
  const int64_t per_image = static_cast<int64_t>(starts.size());
  const int64_t total = per_image * input.size(0);
  const at::Tensor w = importance_map(roi, opts.mode, opts.sigma_scale, sw_device);

  at::Tensor out, count;
  for (int64_t first = 0; first < total; first += opts.sw_batch_size) {
    const int64_t last = std::min(total, first + opts.sw_batch_size);
    std::vector<at::Tensor> windows;
    for (int64_t t = first; t < last; ++t) {
      const int64_t b = t / per_image;
      auto idx = window_index(starts[t % per_image], roi);
      idx[0] = at::indexing::TensorIndex(b);
      windows.push_back(x.index(idx));
    }
    at::Tensor pred = predictor(at::stack(windows).to(sw_device));
    if (pred.dim() != nd + 2 || pred.size(0) != last - first)
      fail("the predictor returned shape ", pred.sizes(), " for ", last - first, " windows");
    for (int64_t d = 0; d < nd; ++d)
      if (pred.size(2 + d) != roi[d]) fail("the predictor changed the window size: ", pred.sizes(), " vs roi ", roi);
    pred = (pred.to(at::kFloat) * w).to(out_device);
    if (!out.defined()) {
      std::vector<int64_t> shape = {input.size(0), pred.size(1)};
      shape.insert(shape.end(), padded.begin(), padded.end());
      out = at::zeros(shape, at::TensorOptions().dtype(at::kFloat).device(out_device));
      shape[1] = 1;
      count = at::zeros(shape, out.options());
    }
    const at::Tensor w_out = w.to(out_device);
    for (int64_t t = first; t < last; ++t) {
      auto idx = window_index(starts[t % per_image], roi);
      idx[0] = at::indexing::TensorIndex(t / per_image);
      out.index(idx).add_(pred[t - first]);
      count.index(idx).add_(w_out);
    }
    if (opts.progress) opts.progress(last, total);
  }
  out.div_(count);
  if (!any_pad) return out;
  std::vector<at::indexing::TensorIndex> crop = {at::indexing::Slice(), at::indexing::Slice()};
  for (int64_t d = 0; d < nd; ++d) crop.emplace_back(at::indexing::Slice(pad[2 * (nd - 1 - d)], pad[2 * (nd - 1 - d)] + image[d]));
  return out.index(crop).contiguous();
}

}  // namespace tessera::patching
