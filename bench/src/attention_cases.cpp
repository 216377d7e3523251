#include "tessera/bench/attention_cases.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>
#include <limits>

#include "tessera/torch/attention.h"

namespace tessera::bench {

double attention_flops(const AttentionShape& s, double pass_factor) {
  const double fwd = 4.0 * double(s.batch) * double(s.heads) * double(s.seq) * double(s.seq) * double(s.head_dim);
  return pass_factor * (s.causal ? fwd / 2 : fwd);
}

double pass_flop_factor(Pass p) { return p == Pass::forward ? 1.0 : (p == Pass::backward ? 2.5 : 3.5); }

torch::Tensor naive_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal) {
  const double scale = 1.0 / std::sqrt(double(q.size(-1)));
  auto qt = q.transpose(1, 2), kt = k.transpose(1, 2), vt = v.transpose(1, 2);
  auto s = torch::matmul(qt, kt.transpose(-1, -2)) * scale;
  if (causal) {  // bottom-right aligned, as Tessera and SDPA align it (the same as top-left when Nq = Nk)
    const int64_t nq = q.size(1), nk = k.size(1);
    auto above = torch::ones({nq, nk}, q.options().dtype(torch::kBool)).triu(nk - nq + 1);
    s = s.masked_fill(above, -std::numeric_limits<double>::infinity());
  }
  return torch::matmul(torch::softmax(s, -1), vt).transpose(1, 2);
}

namespace {
bool use_sdpa(const c10::Device& device) { return TORCH_VERSION_MAJOR >= 2 && device.is_cuda(); }
}  // namespace

std::string libtorch_attention_name(const c10::Device& device) { return use_sdpa(device) ? "SDPA" : "naive"; }

torch::Tensor run_attention(AttentionImpl impl, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            bool causal) {
  if (impl == AttentionImpl::tessera) {
    tessera::torch_ops::AttentionOptions o;
    o.causal = causal;
    return std::get<0>(tessera::torch_ops::attention(q, k, v, o));
  }
#if TORCH_VERSION_MAJOR >= 2
  if (use_sdpa(q.device()))  // SDPA takes [B, H, N, D]: the transposed views, no copies
    return at::scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), {}, 0.0, causal)
        .transpose(1, 2);
#endif
  return naive_attention(q, k, v, causal);
}

AttentionInputs make_attention_inputs(const AttentionShape& s, const c10::Device& device, c10::ScalarType dtype) {
  torch::manual_seed(0);
  const auto opts = torch::TensorOptions().device(device).dtype(dtype);
  auto r = [&] { return torch::randn({s.batch, s.seq, s.heads, s.head_dim}, opts); };
  AttentionInputs in{s, r(), r(), r(), r()};
  return in;
}

double time_attention(AttentionImpl impl, const AttentionInputs& in, Pass pass, const TimingOptions& timing,
                      torch::Tensor* out) {
  const bool causal = in.shape.causal;
  if (pass == Pass::forward) {
    torch::NoGradGuard no_grad;
    torch::Tensor o;
    const double ms = median_ms(timing, [&] { o = run_attention(impl, in.q, in.k, in.v, causal); });
    if (out) *out = o;
    return ms;
  }
  torch::AutoGradMode grad_on(true);
  auto q = in.q.detach().requires_grad_(true), k = in.k.detach().requires_grad_(true),
       v = in.v.detach().requires_grad_(true);
  // Fresh gradients each run: accumulating into old ones would time an extra add.
  auto clear = [&] {
    for (auto* t : {&q, &k, &v}) t->mutable_grad() = torch::Tensor();
  };
  if (pass == Pass::forward_backward)
    return median_ms(timing, [&] { run_attention(impl, q, k, v, causal).backward(in.g); }, clear);
  torch::Tensor o;
  return median_ms(timing, [&] { o.backward(in.g); }, [&] {
    clear();
    o = run_attention(impl, q, k, v, causal);
  });
}

}  // namespace tessera::bench
