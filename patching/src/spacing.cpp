#include "tessera/patching/spacing.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace tessera::patching {
namespace {

constexpr double kAffineTol = 1e-3;  // MONAI's AFFINE_TOL
constexpr int64_t kSlab = 16;        // planes of the last axis per step of invert_spacing_argmax

void check_args(const at::Tensor& x, const std::vector<double>& spacing, const std::vector<double>& pixdim) {
  const size_t nd = static_cast<size_t>(x.dim() - 1);
  if (x.dim() < 2 || spacing.size() != nd || pixdim.size() != nd) {
    std::ostringstream os;
    os << "spacing: expected a [C, *spatial] tensor and one spacing and pixdim per spatial dim, got " << x.sizes()
       << " with " << spacing.size() << " and " << pixdim.size();
    throw std::invalid_argument(os.str());
  }
  for (size_t d = 0; d < nd; ++d)
    if (!(spacing[d] > 0) || !(pixdim[d] > 0) || !std::isfinite(spacing[d]) || !std::isfinite(pixdim[d]))
      throw std::invalid_argument("spacing: spacings and pixdims must be finite and > 0");
}

// Coordinates along one axis of `n_out` points spaced `step` input voxels apart, from 0.
std::vector<double> points(int64_t n_out, double step) {
  std::vector<double> p(n_out);
  for (int64_t o = 0; o < n_out; ++o) p[o] = double(o) * step;
  return p;
}

}  // namespace

std::vector<double> effective_pixdim(const std::vector<double>& spacing, const std::vector<double>& pixdim) {
  std::vector<double> out(pixdim);
  for (size_t d = 0; d < out.size() && d < spacing.size(); ++d)
    if (std::abs(spacing[d] - pixdim[d]) <= kAffineTol) out[d] = spacing[d];
  return out;
}

std::vector<int64_t> spacing_output_size(const std::vector<int64_t>& size, const std::vector<double>& spacing,
                                         const std::vector<double>& pixdim) {
  const std::vector<double> t = effective_pixdim(spacing, pixdim);
  std::vector<int64_t> out(size.size());
  // numpy's round (half to even) of the extent in output voxels plus one, as compute_shape_offset.
  for (size_t d = 0; d < size.size(); ++d)
    out[d] = std::max<int64_t>(1, static_cast<int64_t>(std::nearbyint(double(size[d] - 1) * spacing[d] / t[d] + 1.0)));
  return out;
}

at::Tensor spacing_resample(const at::Tensor& x, const std::vector<double>& spacing, const std::vector<double>& pixdim,
                            Interp interp) {
  check_args(x, spacing, pixdim);
  const std::vector<int64_t> in_size(x.sizes().begin() + 1, x.sizes().end());
  const std::vector<int64_t> out_size = spacing_output_size(in_size, spacing, pixdim);
  const std::vector<double> t = effective_pixdim(spacing, pixdim);
  at::Tensor y = interp == Interp::nearest ? x : x.to(at::kFloat);
  for (size_t d = 0; d < t.size(); ++d)
    if (t[d] != spacing[d] || out_size[d] != in_size[d]) y = sample_along(y, int64_t(d) + 1, points(out_size[d], t[d] / spacing[d]), interp);
  return y.contiguous();
}

at::Tensor invert_spacing(const at::Tensor& y, const std::vector<double>& spacing, const std::vector<double>& pixdim,
                          const std::vector<int64_t>& size, Interp interp) {
  check_args(y, spacing, pixdim);
  if (size.size() != spacing.size()) throw std::invalid_argument("invert_spacing: one size per spatial dim");
  const std::vector<double> t = effective_pixdim(spacing, pixdim);
  at::Tensor x = interp == Interp::nearest ? y : y.to(at::kFloat);
  for (size_t d = 0; d < t.size(); ++d)
    if (t[d] != spacing[d] || size[d] != y.size(int64_t(d) + 1)) x = sample_along(x, int64_t(d) + 1, points(size[d], spacing[d] / t[d]), interp);
  return x.contiguous();
}

at::Tensor invert_spacing_argmax(const at::Tensor& scores, const std::vector<double>& spacing,
                                 const std::vector<double>& pixdim, const std::vector<int64_t>& size, Interp interp) {
  check_args(scores, spacing, pixdim);
  if (size.size() != spacing.size()) throw std::invalid_argument("invert_spacing_argmax: one size per spatial dim");
  const int64_t last = scores.dim() - 1, n_in = scores.size(last);
  const std::vector<double> t = effective_pixdim(spacing, pixdim);
  std::vector<at::Tensor> slabs;
  for (int64_t o0 = 0; o0 < size.back(); o0 += kSlab) {
    const int64_t o1 = std::min(size.back(), o0 + kSlab);
    // The last axis first, on the few resampled planes this slab reads; then the others.
    std::vector<double> pos = points(o1, spacing.back() / t.back());
    pos.erase(pos.begin(), pos.begin() + o0);
    for (double& p : pos) p = std::min(p, double(n_in - 1));
    const int64_t lo = static_cast<int64_t>(std::floor(pos.front()));
    const int64_t hi = std::min(n_in - 1, static_cast<int64_t>(std::ceil(pos.back())));
    for (double& p : pos) p -= double(lo);
    at::Tensor slab = sample_along(scores.narrow(last, lo, hi - lo + 1), last, pos, interp);
    for (int64_t d = 0; d + 1 < last; ++d)
      if (t[d] != spacing[d] || size[d] != slab.size(d + 1)) slab = sample_along(slab, d + 1, points(size[d], spacing[d] / t[d]), interp);
    slabs.push_back(slab.argmax(0, true).to(at::kInt));
  }
  return at::cat(slabs, last).contiguous();
}

}  // namespace tessera::patching
