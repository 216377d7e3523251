#include "tessera/models/dilated_attention.h"

#include <torch/torch.h>

#include <limits>
#include <sstream>
#include <stdexcept>

#include "tessera/torch/attention.h"

namespace tessera::models {
namespace {

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  std::ostringstream os;
  os << "dilated_attention: ";
  (os << ... << args);
  throw std::invalid_argument(os.str());
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Where one branch's sparse tokens come from and go to. Sparse token
// (segment s, index l, head j) is element (s * L + l) * H + j of the gathered
// [B, n_seg * L * H, D] tensor; positions are flat (position * H + head)
// indices into [B, N * H, D].
struct Branch {
  int64_t n_seg = 0;     // segments of length seg
  int64_t seg = 0;       // min(segment length, N)
  int64_t L = 0;         // sparse tokens per segment and head: ceil(seg / r)
  bool identity = false; // r = 1 and N = n_seg * seg: gather and scatter are views
  torch::Tensor src;     // int64 [n_seg * L * H]: where each query/key/value comes from (0 where padding)
  torch::Tensor pad;     // bool, same shape: true where the token is zero padding (undefined: none)
  torch::Tensor dst;     // int64, same shape: where its output goes (N * H: dropped, past the end)
};

Branch plan_branch(int64_t N, int64_t H, int64_t w, int64_t r, const torch::Device& device) {
  Branch b;
  b.seg = std::min(w, N);
  b.n_seg = ceil_div(N, b.seg);
  b.L = ceil_div(b.seg, r);
  b.identity = r == 1 && b.n_seg * b.seg == N;
  if (b.identity) return b;
  const auto opts = torch::TensorOptions().dtype(torch::kLong).device(device);
  const int64_t heads_per_group = ceil_div(H, r);  // heads padded to a multiple of r, then split into r groups
  const auto s = torch::arange(b.n_seg, opts).view({-1, 1, 1});
  const auto l = torch::arange(b.L, opts).view({1, -1, 1});
  const auto j = torch::arange(H, opts).view({1, 1, -1});
  const auto t = l * r + torch::div(j, heads_per_group, "floor");  // position inside the (r-padded) segment
  const auto from = s * b.seg + t;
  const auto pad = (t >= b.seg).logical_or(from >= N);
  b.src = torch::where(pad, torch::zeros_like(from), from * H + j).reshape({-1});
  if (pad.any().item<bool>()) b.pad = pad.reshape({-1});
  // The reference scatters into segments of the r-padded length L * r.
  const auto to = s * (b.L * r) + t;
  b.dst = torch::where(to < N, to * H + j, torch::full_like(to, N * H)).reshape({-1});
  return b;
}

// [B, N, H, D] -> the branch's sparse segments [B * n_seg, L, H, D].
torch::Tensor gather(const torch::Tensor& x, const Branch& b) {
  const int64_t B = x.size(0), N = x.size(1), H = x.size(2), D = x.size(3);
  if (b.identity) return x.reshape({B * b.n_seg, b.seg, H, D});
  auto g = x.reshape({B, N * H, D}).index_select(1, b.src);
  if (b.pad.defined()) g.masked_fill_(b.pad.view({1, -1, 1}), 0.0);
  return g.view({B * b.n_seg, b.L, H, D});
}

}  // namespace

torch::Tensor dilated_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const DilatedAttentionOptions& o) {
  if (q.dim() != 4) fail("q must be [B, N, H, D], got ", q.sizes());
  if (k.sizes() != q.sizes() || v.sizes() != q.sizes())
    fail("q, k and v must have the same shape, got ", q.sizes(), ", ", k.sizes(), " and ", v.sizes());
  if (o.segment_lengths.empty() || o.segment_lengths.size() != o.dilated_ratios.size())
    fail("need as many segment lengths as dilated ratios (and at least one), got ", o.segment_lengths.size(), " and ",
         o.dilated_ratios.size());
  for (size_t i = 0; i < o.segment_lengths.size(); ++i)
    if (o.segment_lengths[i] <= 0 || o.dilated_ratios[i] <= 0)
      fail("segment lengths and dilated ratios must be positive, branch ", i, " has ", o.segment_lengths[i], " and ",
           o.dilated_ratios[i]);
  const int64_t B = q.size(0), N = q.size(1), H = q.size(2), D = q.size(3);
  if (B == 0 || N == 0) return torch::zeros_like(q);
  const auto dev = q.device();

  // Each branch: its sparse outputs [B, n_seg * L * H, D] and LSEs [B, n_seg * L * H] (fp32).
  std::vector<Branch> plans;
  std::vector<torch::Tensor> outs, lses;
  for (size_t i = 0; i < o.segment_lengths.size(); ++i) {
    plans.push_back(plan_branch(N, H, o.segment_lengths[i], o.dilated_ratios[i], dev));
    const Branch& b = plans.back();
    auto [out, lse] = tessera::torch_ops::attention(gather(q, b), gather(k, b), gather(v, b));
    const int64_t L = out.size(1);
    outs.push_back(out.reshape({B, b.n_seg * L * H, D}));
    // [B * n_seg, H, L] -> (s, l, h) order.
    auto l = lse.view({B, b.n_seg, H, L}).permute({0, 1, 3, 2}).reshape({B, b.n_seg * L * H});
    lses.push_back(o.merge_weights_grad ? l : l.detach());
  }

  // Per (position, head): the largest covering LSE, so that every exp below is
  // <= 1 and the covering branch with the largest LSE contributes exactly 1.
  // A shift that is constant for the gradient: the softmax does not depend on it.
  torch::Tensor top;
  {
    torch::NoGradGuard no_grad;
    top = torch::full({B, N * H + 1}, -std::numeric_limits<float>::infinity(),
                      torch::TensorOptions().dtype(torch::kFloat).device(dev));
    for (size_t i = 0; i < plans.size(); ++i) {
      if (plans[i].identity) {
        auto t = top.narrow(1, 0, N * H);
        t.copy_(torch::maximum(t, lses[i]));
      } else {
        // dst is one-to-one except for the dropped slot, which is set below.
        const auto dst = plans[i].dst.expand({B, -1});
        top.scatter_(1, dst, torch::maximum(top.gather(1, dst), lses[i].detach()));
      }
    }
    // Tokens the reference slices off (past the end) get weight exp(-inf) = 0.
    top.narrow(1, N * H, 1).fill_(std::numeric_limits<float>::infinity());
  }

  // Weighted sums into one dense accumulator; the last row collects what the
  // reference slices off past the end.
  auto num = torch::zeros({B, N * H + 1, D}, q.options());
  auto den = torch::zeros({B, N * H + 1}, torch::TensorOptions().dtype(torch::kFloat).device(dev));
  for (size_t i = 0; i < plans.size(); ++i) {
    const Branch& b = plans[i];
    if (b.identity) {
      const auto w = torch::exp(lses[i] - top.narrow(1, 0, N * H));
      den.narrow(1, 0, N * H).add_(w);
      num.narrow(1, 0, N * H).add_(w.unsqueeze(-1).to(q.scalar_type()) * outs[i]);
    } else {
      const auto w = torch::exp(lses[i] - top.gather(1, b.dst.expand({B, -1})));
      den.index_add_(1, b.dst, w);
      num.index_add_(1, b.dst, w.unsqueeze(-1).to(q.scalar_type()) * outs[i]);
    }
  }
  // den >= 1 wherever some branch covers the position (its top term is exp(0));
  // a position no branch covers (possible only without an r = 1 branch) gets 0,
  // as the reference's equal weights over all-zero outputs give.
  const auto out = num.narrow(1, 0, N * H) / den.narrow(1, 0, N * H).clamp_min(1.0).unsqueeze(-1).to(q.scalar_type());
  return out.view({B, N, H, D});
}

}  // namespace tessera::models
