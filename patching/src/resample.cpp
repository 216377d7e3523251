#include "tessera/patching/resample.h"

#include <algorithm>
#include <cmath>

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

}  // namespace tessera::patching
