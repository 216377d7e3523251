#include "tessera/patching/resample.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace tessera::patching {
namespace {

// Nearest voxel centre along one dim, computed in double: out o ↦ in round(o (n_in-1)/(n_out-1)).
at::Tensor nearest_indices(int64_t n_in, int64_t n_out, const at::Device& dev) {
  std::vector<int64_t> idx(n_out);
  for (int64_t o = 0; o < n_out; ++o)
    idx[o] = n_out == 1 ? 0 : std::llround(double(o) * double(n_in - 1) / double(n_out - 1));
  return at::tensor(idx, at::TensorOptions().dtype(at::kLong)).to(dev);
}

}  // namespace

at::Tensor resample_to_size(const at::Tensor& x, const std::vector<int64_t>& size, Interp interp) {
  const int64_t nd = x.dim() - 1;
  if (nd < 1 || static_cast<int64_t>(size.size()) != nd) {
    std::ostringstream os;
    os << "resample: expected a [C, *spatial] tensor with " << size.size() << " spatial dims, got " << x.sizes();
    throw std::invalid_argument(os.str());
  }
  for (int64_t s : size)
    if (s < 1) throw std::invalid_argument("resample: output sizes must be >= 1");
  if (interp == Interp::nearest) {
    at::Tensor y = x;
    for (int64_t d = 0; d < nd; ++d) y = y.index_select(1 + d, nearest_indices(x.size(1 + d), size[d], x.device()));
    return y.contiguous();
  }
  // Separable linear interpolation between voxel centres, one dim at a time (exact at the
  // centres it shares with the input; a size-1 dim is replicated).
  at::Tensor y = x.to(at::kFloat);
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t n_in = y.size(1 + d), n_out = size[d];
    if (n_in == n_out) continue;
    std::vector<int64_t> lo(n_out), hi(n_out);
    std::vector<float> frac(n_out);
    for (int64_t o = 0; o < n_out; ++o) {
      const double pos = n_out == 1 ? 0.0 : double(o) * double(n_in - 1) / double(n_out - 1);
      lo[o] = std::min<int64_t>(static_cast<int64_t>(std::floor(pos)), n_in - 1);
      hi[o] = std::min<int64_t>(lo[o] + 1, n_in - 1);
      frac[o] = static_cast<float>(pos - double(lo[o]));
    }
    const auto lopt = at::TensorOptions().dtype(at::kLong).device(y.device());
    at::Tensor a = y.index_select(1 + d, at::tensor(lo, lopt)), b = y.index_select(1 + d, at::tensor(hi, lopt));
    std::vector<int64_t> shape(y.dim(), 1);
    shape[1 + d] = n_out;
    at::Tensor f = at::tensor(frac, at::TensorOptions().dtype(at::kFloat).device(y.device())).view(shape);
    y = a + (b - a) * f;
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
