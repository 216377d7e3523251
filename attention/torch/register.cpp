// Op registration: torch.ops.tessera.attention with CPU, CUDA and Autograd
// kernels, plus the non-differentiable forward/backward ops it is built on
// (useful to benchmarks and to callers that manage their own graphs).
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <string>

#include "binding.h"
#include "tessera/attention/attention.h"
#include "tessera/torch/attention.h"

namespace tessera::torch_ops {
namespace {

using at::Tensor;
using c10::optional;
using detail::Options;

Tensor opt(const optional<Tensor>& t) { return t.has_value() ? *t : Tensor(); }
optional<Tensor> as_opt(const Tensor& t) { return t.defined() ? optional<Tensor>(t) : optional<Tensor>(); }

Options make_options(const optional<Tensor>& bias, const optional<Tensor>& mask, const optional<Tensor>& alibi,
                     const optional<Tensor>& cu_q, const optional<Tensor>& cu_k, int64_t max_q, int64_t max_k,
                     optional<double> scale, bool causal, int64_t wl, int64_t wr, double dropout_p, int64_t seed,
                     int64_t offset, bool deterministic) {
  if (scale.has_value() && !(std::isfinite(*scale) && *scale != 0.0))
    throw tessera::attention::Error("tessera.attention: scale must be a finite non-zero number, got " +
                                    std::to_string(*scale));
  Options o;
  o.bias = opt(bias);
  o.mask = opt(mask);
  o.alibi_slopes = opt(alibi);
  o.cu_seqlens_q = opt(cu_q);
  o.cu_seqlens_k = opt(cu_k);
  o.max_seqlen_q = max_q;
  o.max_seqlen_k = max_k;
  o.scale = scale.has_value() ? *scale : 0.0;
  o.causal = causal;
  o.window_left = wl;
  o.window_right = wr;
  o.dropout_p = dropout_p;
  o.seed = seed;
  o.offset = offset;
  o.deterministic = deterministic;
  if (o.dropout_p > 0 && o.seed == 0)  // draw from torch's default generator: honours torch::manual_seed
    o.seed = at::randint(1, std::numeric_limits<int64_t>::max(), {1}, at::TensorOptions().dtype(at::kLong)).item<int64_t>();
  return o;
}

std::tuple<Tensor, Tensor> attention_fwd(const Tensor& q, const Tensor& k, const Tensor& v, const optional<Tensor>& bias,
                                         const optional<Tensor>& mask, const optional<Tensor>& alibi,
                                         const optional<Tensor>& cu_q, const optional<Tensor>& cu_k, int64_t max_q,
                                         int64_t max_k, optional<double> scale, bool causal, int64_t wl, int64_t wr,
                                         double dropout_p, int64_t seed, int64_t offset, bool deterministic) {
  return detail::forward(q, k, v,
                         make_options(bias, mask, alibi, cu_q, cu_k, max_q, max_k, scale, causal, wl, wr, dropout_p,
                                      seed, offset, deterministic));
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> attention_bwd(
    const Tensor& dout, const optional<Tensor>& dlse, const Tensor& q, const Tensor& k, const Tensor& v,
    const Tensor& out, const Tensor& lse, const optional<Tensor>& bias, const optional<Tensor>& mask,
    const optional<Tensor>& alibi, const optional<Tensor>& cu_q, const optional<Tensor>& cu_k, int64_t max_q,
    int64_t max_k, optional<double> scale, bool causal, int64_t wl, int64_t wr, double dropout_p, int64_t seed,
    int64_t offset, bool deterministic, bool bias_grad, bool mask_grad) {
  if (dropout_p > 0 && seed == 0) throw tessera::attention::Error("tessera.attention_bwd: dropout needs the forward's seed");
  auto o = make_options(bias, mask, alibi, cu_q, cu_k, max_q, max_k, scale, causal, wl, wr, dropout_p, seed, offset,
                        deterministic);
  auto r = detail::backward(dout, opt(dlse), q, k, v, out, lse, o, bias_grad, mask_grad);
  // Ops cannot return None: an empty tensor stands for "not asked for".
  for (Tensor* t : {&std::get<3>(r), &std::get<4>(r)})
    if (!t->defined()) *t = at::empty({0}, q.options().dtype(at::kFloat));
  return r;
}

// The non-differentiable ops through the dispatcher: the autograd node calls them this way
// (not the binding directly) so that tracers (torch.compile's fake tensors) see them too.
std::tuple<Tensor, Tensor> call_fwd(const Tensor& q, const Tensor& k, const Tensor& v, const Options& o) {
  static auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("tessera::attention_fwd", "").typed<decltype(attention_fwd)>();
  return op.call(q, k, v, as_opt(o.bias), as_opt(o.mask), as_opt(o.alibi_slopes), as_opt(o.cu_seqlens_q),
                 as_opt(o.cu_seqlens_k), o.max_seqlen_q, o.max_seqlen_k,
                 o.scale != 0.0 ? optional<double>(o.scale) : optional<double>(), o.causal, o.window_left,
                 o.window_right, o.dropout_p, o.seed, o.offset, o.deterministic);
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> call_bwd(const Tensor& dout, const Tensor& dlse, const Tensor& q,
                                                            const Tensor& k, const Tensor& v, const Tensor& out,
                                                            const Tensor& lse, const Options& o, bool bias_grad,
                                                            bool mask_grad) {
  static auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("tessera::attention_bwd", "").typed<decltype(attention_bwd)>();
  // The op's "not asked for" placeholders become undefined gradients again.
  auto r = op.call(dout.defined() ? dout : at::zeros_like(out), as_opt(dlse), q, k, v, out, lse, as_opt(o.bias),
                   as_opt(o.mask), as_opt(o.alibi_slopes), as_opt(o.cu_seqlens_q), as_opt(o.cu_seqlens_k),
                   o.max_seqlen_q, o.max_seqlen_k, o.scale != 0.0 ? optional<double>(o.scale) : optional<double>(),
                   o.causal, o.window_left, o.window_right, o.dropout_p, o.seed, o.offset, o.deterministic, bias_grad,
                   mask_grad);
  if (!bias_grad) std::get<3>(r) = Tensor();
  if (!mask_grad) std::get<4>(r) = Tensor();
  return r;
}

// The autograd node: forward saves what the recompute-based backward needs.
struct AttentionFunction : public torch::autograd::Function<AttentionFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, Tensor q, Tensor k, Tensor v,
                                                const optional<Tensor>& bias_in, const optional<Tensor>& mask_in,
                                                const Options& o) {
    // Optional (not undefined) tensors: LibTorch's Function records only present ones as inputs.
    const Tensor bias = opt(bias_in), mask = opt(mask_in);
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out, lse] = call_fwd(q, k, v, o);
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["bias"] = bias;
    ctx->saved_data["mask"] = mask;
    ctx->saved_data["alibi"] = o.alibi_slopes;
    ctx->saved_data["cu_q"] = o.cu_seqlens_q;
    ctx->saved_data["cu_k"] = o.cu_seqlens_k;
    ctx->saved_data["max_q"] = o.max_seqlen_q;
    ctx->saved_data["max_k"] = o.max_seqlen_k;
    ctx->saved_data["scale"] = o.scale;
    ctx->saved_data["causal"] = o.causal;
    ctx->saved_data["wl"] = o.window_left;
    ctx->saved_data["wr"] = o.window_right;
    ctx->saved_data["dropout"] = o.dropout_p;
    ctx->saved_data["seed"] = o.seed;
    ctx->saved_data["offset"] = o.offset;
    ctx->saved_data["det"] = o.deterministic;
    ctx->saved_data["bias_grad"] = bias.defined() && bias.requires_grad();
    ctx->saved_data["mask_grad"] = mask.defined() && mask.requires_grad();
    return {out, lse};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto tensor = [&](const char* key) {
      const auto& iv = ctx->saved_data[key];
      return iv.isTensor() ? iv.toTensor() : Tensor();
    };
    Options o;
    o.bias = tensor("bias");
    o.mask = tensor("mask");
    o.alibi_slopes = tensor("alibi");
    o.cu_seqlens_q = tensor("cu_q");
    o.cu_seqlens_k = tensor("cu_k");
    o.max_seqlen_q = ctx->saved_data["max_q"].toInt();
    o.max_seqlen_k = ctx->saved_data["max_k"].toInt();
    o.scale = ctx->saved_data["scale"].toDouble();
    o.causal = ctx->saved_data["causal"].toBool();
    o.window_left = ctx->saved_data["wl"].toInt();
    o.window_right = ctx->saved_data["wr"].toInt();
    o.dropout_p = ctx->saved_data["dropout"].toDouble();
    o.seed = ctx->saved_data["seed"].toInt();
    o.offset = ctx->saved_data["offset"].toInt();
    o.deterministic = ctx->saved_data["det"].toBool();
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [dq, dk, dv, dbias, dmask] =
        call_bwd(grads[0], grads[1], saved[0], saved[1], saved[2], saved[3], saved[4], o,
                 ctx->saved_data["bias_grad"].toBool(), ctx->saved_data["mask_grad"].toBool());
    return {dq, dk, dv, dbias, dmask, Tensor()};
  }
};

std::tuple<Tensor, Tensor> attention_autograd(const Tensor& q, const Tensor& k, const Tensor& v,
                                              const optional<Tensor>& bias, const optional<Tensor>& mask,
                                              const optional<Tensor>& alibi, const optional<Tensor>& cu_q,
                                              const optional<Tensor>& cu_k, int64_t max_q, int64_t max_k,
                                              optional<double> scale, bool causal, int64_t wl, int64_t wr,
                                              double dropout_p, int64_t seed, int64_t offset, bool deterministic) {
  const Options o = make_options(bias, mask, alibi, cu_q, cu_k, max_q, max_k, scale, causal, wl, wr, dropout_p, seed,
                                 offset, deterministic);
  auto outs = AttentionFunction::apply(q, k, v, as_opt(o.bias), as_opt(o.mask), o);
  return {outs[0], outs[1]};
}

#define TESSERA_OPT_ARGS \
    "Tensor? bias=None, Tensor? mask=None, Tensor? alibi_slopes=None, Tensor? cu_seqlens_q=None, "  \
    "Tensor? cu_seqlens_k=None, int max_seqlen_q=-1, int max_seqlen_k=-1, float? scale=None, bool causal=False, "  \
    "int window_left=-1, int window_right=-1, float dropout_p=0.0, int seed=0, int offset=0, bool deterministic=False"

}  // namespace

TORCH_LIBRARY(tessera, m) {
  m.def("attention(Tensor q, Tensor k, Tensor v, " TESSERA_OPT_ARGS ") -> (Tensor, Tensor)");
  m.def("attention_fwd(Tensor q, Tensor k, Tensor v, " TESSERA_OPT_ARGS ") -> (Tensor, Tensor)");
  m.def("attention_bwd(Tensor dout, Tensor? dlse, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, " TESSERA_OPT_ARGS
        ", bool bias_grad=False, bool mask_grad=False) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(tessera, CPU, m) {
  m.impl("attention", attention_fwd);
  m.impl("attention_fwd", attention_fwd);
  m.impl("attention_bwd", attention_bwd);
}

#ifdef TESSERA_TORCH_CUDA
TORCH_LIBRARY_IMPL(tessera, CUDA, m) {
  m.impl("attention", attention_fwd);
  m.impl("attention_fwd", attention_fwd);
  m.impl("attention_bwd", attention_bwd);
}
#endif

TORCH_LIBRARY_IMPL(tessera, Autograd, m) { m.impl("attention", attention_autograd); }

std::tuple<Tensor, Tensor> attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("tessera::attention", "").typed<decltype(attention_fwd)>();
  return op.call(q, k, v, o.bias, o.mask, o.alibi_slopes, o.cu_seqlens_q, o.cu_seqlens_k, o.max_seqlen_q, o.max_seqlen_k,
                 o.scale, o.causal, o.window_left, o.window_right, o.dropout_p, o.seed, o.offset, o.deterministic);
}

void ensure_registered() {}

}  // namespace tessera::torch_ops
