#include "tessera/patching/intensity.h"

#include <sstream>
#include <stdexcept>

namespace tessera::patching {
namespace {

std::vector<at::indexing::TensorIndex> box_index(const Box& box) {
  std::vector<at::indexing::TensorIndex> idx = {at::indexing::Slice()};
  for (size_t d = 0; d < box.start.size(); ++d) idx.emplace_back(at::indexing::Slice(box.start[d], box.end[d]));
  return idx;
}

}  // namespace

at::Tensor scale_intensity_range(const at::Tensor& x, double a_min, double a_max, double b_min, double b_max,
                                 bool clip) {
  if (a_max == a_min) {
    std::ostringstream os;
    os << "scale_intensity_range: a_min and a_max are both " << a_min;
    throw std::invalid_argument(os.str());
  }
  at::Tensor y = (x.to(at::kFloat) - a_min) / (a_max - a_min) * (b_max - b_min) + b_min;
  if (clip) y = y.clamp(std::min(b_min, b_max), std::max(b_min, b_max));
  return y;
}

at::Tensor normalize_intensity(const at::Tensor& x0, bool nonzero, bool channel_wise) {
  at::Tensor x = x0.to(at::kFloat).clone();
  auto normalise = [&](at::Tensor v) {  // v: a view, normalised in place
    at::Tensor sel = nonzero ? v.ne(0) : at::ones_like(v, at::kBool);
    if (!sel.any().item<bool>()) return;
    at::Tensor vals = v.masked_select(sel);
    const double mean = vals.mean().item<double>();
    double std = vals.std(/*unbiased=*/false).item<double>();
    if (std == 0.0) std = 1.0;
    v.masked_scatter_(sel, (vals - mean) / std);
  };
  if (channel_wise) {
    for (int64_t c = 0; c < x.size(0); ++c) normalise(x[c]);
  } else {
    normalise(x);
  }
  return x;
}

Box foreground_box(const at::Tensor& x, double threshold, int64_t margin) {
  const int64_t nd = x.dim() - 1;
  Box box;
  at::Tensor fg = x.gt(threshold).any(0);  // [*spatial]
  const bool any = fg.any().item<bool>();
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t n = x.size(1 + d);
    if (!any) {
      box.start.push_back(0);
      box.end.push_back(n);
      continue;
    }
    std::vector<int64_t> others;
    for (int64_t e = 0; e < nd; ++e)
      if (e != d) others.push_back(e);
    at::Tensor along = others.empty() ? fg : fg.any(others[0]);
    // reduce the remaining dims one by one (indices shift after each reduction)
    for (size_t k = 1; k < others.size(); ++k) along = along.any(others[k] - static_cast<int64_t>(k));
    at::Tensor where = at::nonzero(along).flatten();
    const int64_t lo = where.min().item<int64_t>(), hi = where.max().item<int64_t>() + 1;
    box.start.push_back(std::max<int64_t>(0, lo - margin));
    box.end.push_back(std::min<int64_t>(n, hi + margin));
  }
  return box;
}

at::Tensor crop(const at::Tensor& x, const Box& box) { return x.index(box_index(box)).contiguous(); }

at::Tensor uncrop(const at::Tensor& cropped, const Box& box, const std::vector<int64_t>& spatial_size, double fill) {
  std::vector<int64_t> shape = {cropped.size(0)};
  shape.insert(shape.end(), spatial_size.begin(), spatial_size.end());
  at::Tensor out = at::full(shape, fill, cropped.options());
  out.index(box_index(box)).copy_(cropped);
  return out;
}

std::pair<at::Tensor, Box> divisible_pad(const at::Tensor& x, int64_t k, double value) {
  if (k < 1) throw std::invalid_argument("divisible_pad: k must be >= 1");
  const int64_t nd = x.dim() - 1;
  std::vector<int64_t> pad(2 * nd, 0);
  Box box;
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t n = x.size(1 + d), target = (n + k - 1) / k * k, diff = target - n;
    pad[2 * (nd - 1 - d)] = diff / 2;
    pad[2 * (nd - 1 - d) + 1] = diff - diff / 2;
    box.start.push_back(diff / 2);
    box.end.push_back(diff / 2 + n);
  }
  return {at::constant_pad_nd(x, pad, value), box};
}

}  // namespace tessera::patching
