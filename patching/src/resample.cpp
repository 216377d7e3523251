#include "tessera/patching/resample.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace tessera::patching {

at::Tensor sample_along(const at::Tensor& x, int64_t dim, const std::vector<double>& pos, Interp interp) {
  const int64_t n_in = x.size(dim), n_out = static_cast<int64_t>(pos.size());
  const auto lopt = at::TensorOptions().dtype(at::kLong).device(x.device());
  std::vector<int64_t> lo(n_out), hi(n_out);
  std::vector<float> frac(n_out);
  for (int64_t o = 0; o < n_out; ++o) {
    const double p = std::min(std::max(pos[o], 0.0), double(n_in - 1));
    if (interp == Interp::nearest) {
      lo[o] = static_cast<int64_t>(std::nearbyint(p));
      continue;
    }
    lo[o] = std::min<int64_t>(static_cast<int64_t>(std::floor(p)), n_in - 1);
    hi[o] = std::min<int64_t>(lo[o] + 1, n_in - 1);
    frac[o] = static_cast<float>(p - double(lo[o]));
  }
  if (interp == Interp::nearest) return x.index_select(dim, at::tensor(lo, lopt));
  const at::Tensor y = x.to(at::kFloat);
  at::Tensor a = y.index_select(dim, at::tensor(lo, lopt)), b = y.index_select(dim, at::tensor(hi, lopt));
  std::vector<int64_t> shape(y.dim(), 1);
  shape[dim] = n_out;
  const at::Tensor f = at::tensor(frac, at::TensorOptions().dtype(at::kFloat).device(y.device())).view(shape);
  return a + (b - a) * f;
}

at::Tensor resample_to_size(const at::Tensor& x, const std::vector<int64_t>& size, Interp interp) {
  const int64_t nd = x.dim() - 1;
  if (nd < 1 || static_cast<int64_t>(size.size()) != nd) {
    std::ostringstream os;
    os << "resample: expected a [C, *spatial] tensor with " << size.size() << " spatial dims, got " << x.sizes();
    throw std::invalid_argument(os.str());
  }
  for (int64_t s : size)
    if (s < 1) throw std::invalid_argument("resample: output sizes must be >= 1");
  // One dim at a time, between voxel centres: exact at the centres shared with the input; a
  // size-1 dim is replicated. Nearest rounds halves away from zero, computed in double.
  at::Tensor y = interp == Interp::nearest ? x : x.to(at::kFloat);
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t n_in = y.size(1 + d), n_out = size[d];
    if (n_in == n_out) continue;
    std::vector<double> pos(n_out);
    for (int64_t o = 0; o < n_out; ++o) {
      pos[o] = n_out == 1 ? 0.0 : double(o) * double(n_in - 1) / double(n_out - 1);
      if (interp == Interp::nearest) pos[o] = double(std::llround(pos[o]));
    }
    y = sample_along(y, 1 + d, pos, interp);
  }
  return y.contiguous();
}

Resampled resample_to_spacing(const at::Tensor& x, const std::vector<double>& spacing,
                              const std::vector<double>& target, Interp interp) {
  const int64_t nd = x.dim() - 1;
  if (static_cast<int64_t>(spacing.size()) != nd || static_cast<int64_t>(target.size()) != nd)
    throw std::invalid_argument("resample: spacing and target spacing need one value per spatial dim");
  Resampled r;
  std::vector<int64_t> size(nd);
  for (int64_t d = 0; d < nd; ++d) {
    if (!(spacing[d] > 0) || !(target[d] > 0)) throw std::invalid_argument("resample: spacings must be > 0");
    const int64_t n = x.size(1 + d);
    size[d] = n == 1 ? 1 : std::llround(double(n - 1) * spacing[d] / target[d]) + 1;
    size[d] = std::max<int64_t>(size[d], 1);
    r.spacing.push_back(size[d] == 1 ? spacing[d] * n : spacing[d] * double(n - 1) / double(size[d] - 1));
  }
  r.data = resample_to_size(x, size, interp);
  return r;
}

}  // namespace tessera::patching
