#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "bias_cache.h"
#include "binding.h"
#include "tessera/attention/attention.h"

#ifdef TESSERA_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace tessera::torch_ops::detail {
namespace {

namespace ta = tessera::attention;

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  std::ostringstream os;
  os << "tessera.attention: ";
  (os << ... << args);
  throw ta::Error(os.str());
}

ta::DType to_dtype(at::ScalarType t, const char* name) {
  switch (t) {
    case at::kFloat: return ta::DType::f32;
    case at::kHalf: return ta::DType::f16;
    case at::kBFloat16: return ta::DType::bf16;
    default: fail(name, " must be float32, float16 or bfloat16, got ", t);
  }
}

// Inputs may have any positive strides but a contiguous last dimension; expanded views
// (stride 0) and transposed last dimensions are copied.
at::Tensor last_dim_contiguous(const at::Tensor& t) {
  if (t.numel() == 0) return at::empty(t.sizes(), t.options());  // an empty view may keep stride-0 dims
  bool ok = t.dim() == 0 || t.stride(-1) == 1 || t.size(-1) <= 1;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) ok &= t.stride(d) > 0;
  return ok ? t : t.contiguous();
}

// The kernels index with 32-bit sizes.
void check_fits_int(const char* what, int64_t v) {
  if (v < 0 || v > std::numeric_limits<int32_t>::max()) fail(what, " is ", v, ", outside [0, 2^31)");
}

void strides_of(const at::Tensor& t, bool varlen, int64_t* bs, int64_t* rs, int64_t* hs) {
  if (varlen) {
    *bs = 0;
    *rs = t.stride(0);
    *hs = t.stride(1);
  } else {
    *bs = t.stride(0);
    *rs = t.stride(1);
    *hs = t.stride(2);
  }
}

struct Geometry {
  bool varlen = false;
  int64_t batch = 0, nq = 0, nk = 0, hq = 0, hkv = 0, d = 0, dv = 0, total_q = 0, total_k = 0;
  std::vector<int32_t> cu_q_host, cu_k_host;  // host copies (checked) of the offsets
};

Geometry geometry(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Options& o) {
  Geometry g;
  g.varlen = o.cu_seqlens_q.defined() || o.cu_seqlens_k.defined();
  const int64_t want = g.varlen ? 3 : 4;
  const char* layout = g.varlen ? "[total, H, D] (varlen)" : "[B, N, H, D]";
  if (q.dim() != want) fail("q must be ", layout, ", got ", q.dim(), "-D tensor of shape ", q.sizes());
  if (k.dim() != want) fail("k must be ", layout, ", got ", k.dim(), "-D tensor of shape ", k.sizes());
  if (v.dim() != want) fail("v must be ", layout, ", got ", v.dim(), "-D tensor of shape ", v.sizes());
  if (q.scalar_type() != k.scalar_type() || q.scalar_type() != v.scalar_type())
    fail("q, k, v must share a dtype, got ", q.scalar_type(), ", ", k.scalar_type(), ", ", v.scalar_type());
  if (q.device() != k.device() || q.device() != v.device()) fail("q, k, v must be on one device");
  const int h = g.varlen ? 1 : 2;
  g.hq = q.size(h);
  g.hkv = k.size(h);
  g.d = q.size(h + 1);
  g.dv = v.size(h + 1);
  if (g.d < 1 || g.dv < 1) fail("head dims must be >= 1, got q ", q.sizes(), " and v ", v.sizes());
  if (k.size(h + 1) != g.d) fail("k head dim ", k.size(h + 1), " differs from q head dim ", g.d);
  if (v.size(h) != g.hkv) fail("v has ", v.size(h), " heads but k has ", g.hkv);
  if (v.size(h - 1) != k.size(h - 1)) fail("k and v have different sequence lengths: ", k.sizes(), " vs ", v.sizes());
  if (g.varlen) {
    if (!o.cu_seqlens_q.defined() || !o.cu_seqlens_k.defined()) fail("cu_seqlens_q and cu_seqlens_k must be given together");
    for (const auto* t : {&o.cu_seqlens_q, &o.cu_seqlens_k}) {
      if (t->scalar_type() != at::kInt || t->dim() != 1) fail("cu_seqlens must be 1-D int32 tensors, got ", t->scalar_type(), " ", t->sizes());
      if (t->device() != q.device()) fail("cu_seqlens must be on the device of q");
    }
    if (o.cu_seqlens_q.size(0) != o.cu_seqlens_k.size(0)) fail("cu_seqlens_q and cu_seqlens_k differ in length");
    if (o.cu_seqlens_q.size(0) < 2) fail("cu_seqlens need at least 2 entries (batch + 1)");
    g.batch = o.cu_seqlens_q.size(0) - 1;
    g.total_q = q.size(0);
    g.total_k = k.size(0);
    const at::Tensor cq = o.cu_seqlens_q.to(at::kCPU).contiguous(), ck = o.cu_seqlens_k.to(at::kCPU).contiguous();
    g.cu_q_host.assign(cq.data_ptr<int32_t>(), cq.data_ptr<int32_t>() + cq.numel());
    g.cu_k_host.assign(ck.data_ptr<int32_t>(), ck.data_ptr<int32_t>() + ck.numel());
    int64_t mq = 0, mk = 0;
    for (int64_t b = 0; b < g.batch; ++b) {
      mq = std::max<int64_t>(mq, static_cast<int64_t>(g.cu_q_host[b + 1]) - g.cu_q_host[b]);
      mk = std::max<int64_t>(mk, static_cast<int64_t>(g.cu_k_host[b + 1]) - g.cu_k_host[b]);
    }
    g.nq = o.max_seqlen_q >= 0 ? o.max_seqlen_q : mq;
    g.nk = o.max_seqlen_k >= 0 ? o.max_seqlen_k : mk;
    check_fits_int("max_seqlen_q", g.nq);
    check_fits_int("max_seqlen_k", g.nk);
    check_fits_int("the packed length of q", g.total_q);
    check_fits_int("the packed length of k", g.total_k);
    ta::validate_cu_seqlens(g.cu_q_host.data(), g.cu_k_host.data(), static_cast<int>(g.batch),
                            static_cast<int>(g.total_q), static_cast<int>(g.total_k), static_cast<int>(g.nq),
                            static_cast<int>(g.nk));
  } else {
    g.batch = q.size(0);
    g.nq = q.size(1);
    g.nk = k.size(1);
    if (k.size(0) != g.batch || v.size(0) != g.batch) fail("q, k, v batch sizes differ: ", q.size(0), ", ", k.size(0), ", ", v.size(0));
    check_fits_int("batch", g.batch);
    check_fits_int("q length", g.nq);
    check_fits_int("k length", g.nk);
  }
  check_fits_int("heads", g.hq);
  return g;
}

// A bias as a [b, h, Nq|1, Nk] view with broadcast strides.
at::Tensor bias_view4(const at::Tensor& t, const char* name, const Geometry& g, const at::Tensor& q, bool want_grad) {
  if (t.device() != q.device()) fail(name, " must be on the device of q");
  to_dtype(t.scalar_type(), name);
  at::Tensor b = t;
  if (b.dim() == 2) b = b.unsqueeze(0).unsqueeze(0);
  else if (b.dim() == 3) b = b.unsqueeze(0);
  else if (b.dim() != 4) fail(name, " must be 2-D, 3-D or 4-D, got shape ", t.sizes());
  if (b.size(3) != g.nk) fail(name, " last dimension is ", b.size(3), ", expected the key length ", g.nk);
  if (b.size(2) != g.nq && b.size(2) != 1) fail(name, " query dimension is ", b.size(2), ", expected ", g.nq, " or 1");
  if (b.size(1) != g.hq && b.size(1) != 1)
    fail(name, " head dimension is ", b.size(1), ", expected ", g.hq, " or 1 (", name, " of shape ", t.sizes(),
         t.dim() == 3 ? ": a 3-D term is [heads, Nq, Nk]; a per-window mask is [nW, 1, N, N]" : "", ")");
  if (b.size(0) < 1 || g.batch % b.size(0) != 0)
    fail(name, " batch dimension ", b.size(0), " must divide the batch of ", g.batch, " (slice b % ", b.size(0), " is used)");
  bool needs_copy = b.stride(3) != 1 || want_grad;
  for (int d = 0; d < 3; ++d) needs_copy |= b.size(d) > 1 && b.stride(d) == 0;  // expanded views: materialise
  return needs_copy ? b.contiguous() : b;
}

ta::BiasTerm bias_term(const at::Tensor& b4) {
  ta::BiasTerm t;
  t.ptr = b4.data_ptr();
  t.dtype = to_dtype(b4.scalar_type(), "bias");
  t.batch_mod = static_cast<int>(b4.size(0));
  t.head_mod = static_cast<int>(b4.size(1));
  t.batch_stride = b4.size(0) > 1 ? b4.stride(0) : 0;
  t.head_stride = b4.size(1) > 1 ? b4.stride(1) : 0;
  t.row_stride = b4.size(2) > 1 ? b4.stride(2) : 0;
  return t;
}

// Everything both passes share: sizes, strides, options, bias terms.
struct Prepared {
  Geometry g;
  ta::AttentionParams p;
  at::Tensor q, k, v, bias4[2], alibi, cu_q, cu_k;
};

Prepared prepare(const at::Tensor& q0, const at::Tensor& k0, const at::Tensor& v0, const Options& o, bool bias_grad,
                 bool mask_grad) {
  Prepared r;
  r.g = geometry(q0, k0, v0, o);
  const Geometry& g = r.g;
  r.q = last_dim_contiguous(q0);
  r.k = last_dim_contiguous(k0);
  r.v = last_dim_contiguous(v0);
  ta::AttentionParams& p = r.p;
  p.device = r.q.is_cuda() ? ta::Device::cuda : ta::Device::cpu;
  if (!r.q.is_cuda() && !r.q.is_cpu()) fail("tensors must be on the CPU or a CUDA device, got ", r.q.device());
  p.dtype = to_dtype(r.q.scalar_type(), "q");
  p.batch = static_cast<int>(g.batch);
  p.seqlen_q = static_cast<int>(g.nq);
  p.seqlen_k = static_cast<int>(g.nk);
  p.heads_q = static_cast<int>(g.hq);
  p.heads_kv = static_cast<int>(g.hkv);
  p.head_dim = static_cast<int>(g.d);
  p.head_dim_v = static_cast<int>(g.dv);
  p.q = r.q.data_ptr();
  p.k = r.k.data_ptr();
  p.v = r.v.data_ptr();
  strides_of(r.q, g.varlen, &p.q_batch_stride, &p.q_row_stride, &p.q_head_stride);
  strides_of(r.k, g.varlen, &p.k_batch_stride, &p.k_row_stride, &p.k_head_stride);
  strides_of(r.v, g.varlen, &p.v_batch_stride, &p.v_row_stride, &p.v_head_stride);
  if (g.varlen) {
    r.cu_q = o.cu_seqlens_q.contiguous();
    r.cu_k = o.cu_seqlens_k.contiguous();
    p.total_q = static_cast<int>(g.total_q);
    p.total_k = static_cast<int>(g.total_k);
    // (device-resident offsets were checked through their host copies in geometry())
    p.cu_seqlens_q = r.cu_q.data_ptr<int32_t>();
    p.cu_seqlens_k = r.cu_k.data_ptr<int32_t>();
  }
  p.scale = static_cast<float>(o.scale != 0.0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(g.d)));
  p.causal = o.causal;
  for (const int64_t w : {o.window_left, o.window_right})
    if (w < -1 || w > std::numeric_limits<int32_t>::max())
      fail("window sizes must be >= 0 or -1 (unbounded) and below 2^31, got (", o.window_left, ", ", o.window_right, ")");
  p.window_left = static_cast<int>(o.window_left);
  p.window_right = static_cast<int>(o.window_right);
  const at::Tensor* terms[2] = {&o.bias, &o.mask};
  const char* names[2] = {"bias", "mask"};
  const bool grads[2] = {bias_grad, mask_grad};
  for (int t = 0; t < 2; ++t) {
    if (!terms[t]->defined()) continue;
    r.bias4[p.num_bias] = bias_view4(*terms[t], names[t], g, r.q, grads[t]);
    p.bias[p.num_bias] = bias_term(r.bias4[p.num_bias]);
    ++p.num_bias;
  }
  if (o.alibi_slopes.defined()) {
    const at::Tensor& a = o.alibi_slopes;
    if (a.scalar_type() != at::kFloat) fail("alibi_slopes must be float32, got ", a.scalar_type());
    if (a.device() != r.q.device()) fail("alibi_slopes must be on the device of q");
    if (!((a.dim() == 1 && a.size(0) == g.hq) || (a.dim() == 2 && a.size(0) == g.batch && a.size(1) == g.hq)))
      fail("alibi_slopes must be [", g.hq, "] or [", g.batch, ", ", g.hq, "], got ", a.sizes());
    r.alibi = a.contiguous();
    p.alibi_slopes = r.alibi.data_ptr<float>();
    p.alibi_batch_stride = a.dim() == 2 ? g.hq : 0;
  }
  p.dropout_p = static_cast<float>(o.dropout_p);
  p.dropout_seed = static_cast<uint64_t>(o.seed);
  p.dropout_offset = static_cast<uint64_t>(o.offset);
  p.deterministic = o.deterministic;
  p.num_threads = at::get_num_threads();
  return r;
}

at::Tensor new_like_layout(const Geometry& g, int64_t heads, int64_t d, const at::Tensor& like) {
  if (g.varlen) return at::empty({like.size(0), heads, d}, like.options());
  return at::empty({g.batch, like.size(1), heads, d}, like.options());
}

#ifdef TESSERA_TORCH_CUDA
void set_stream(ta::AttentionParams& p, const at::Tensor& q) {
  if (p.device == ta::Device::cuda) p.stream = c10::cuda::getCurrentCUDAStream(q.device().index()).stream();
}
bool stream_capturing(const ta::AttentionParams& p) {
  cudaStreamCaptureStatus s = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(static_cast<cudaStream_t>(p.stream), &s) != cudaSuccess ||
         s != cudaStreamCaptureStatusNone;
}
#else
void set_stream(ta::AttentionParams& p, const at::Tensor& q) {
  if (p.device == ta::Device::cuda) fail("this build of the tessera op has no CUDA support");
}
bool stream_capturing(const ta::AttentionParams&) { return false; }
#endif

// Bias terms that are constants of the call (no gradient asked for, read in place from the
// caller's tensor, not a copy made here) take their packed copy for this pass from the cache
// (bias_cache.h) instead of being repacked into the workspace. Not while a CUDA graph is
// captured (the graph would keep pointing at a copy the cache may drop). Returns the copies,
// held for the call. Terms over 512 MB packed are repacked every call.
std::vector<at::Tensor> use_cached_packs(Prepared& r, const Options& o, bool backward, const bool grad_wanted[2]) {
  std::vector<at::Tensor> held;
  ta::AttentionParams& p = r.p;
  detail::PackedBiasCache* cache = detail::bias_cache();
  if (!cache || p.device != ta::Device::cuda || p.dtype == ta::DType::f32 || stream_capturing(p)) return held;
  const at::Tensor* terms[2] = {&o.bias, &o.mask};
  for (int t = 0, slot = 0; t < 2; ++t) {
    if (!terms[t]->defined()) continue;
    const at::Tensor& src = *terms[t];
    const at::Tensor& view = r.bias4[slot];
    const int s = slot++;
    if (grad_wanted[t] || src.requires_grad() || src.is_inference()) continue;
    if (view.storage().unsafeGetStorageImpl() != src.storage().unsafeGetStorageImpl()) continue;
    const size_t bytes = ta::packed_bias_term_bytes(p, s, backward);
    if (bytes == 0 || bytes > (size_t(512) << 20)) continue;
    const ta::BiasTerm& bt = p.bias[s];
    const std::vector<int64_t> sig{backward,          static_cast<int64_t>(p.dtype),
                                   p.seqlen_q,        p.seqlen_k,
                                   static_cast<int64_t>(bt.dtype), bt.batch_mod,
                                   bt.head_mod,       bt.batch_stride,
                                   bt.head_stride,    bt.row_stride,
                                   reinterpret_cast<int64_t>(bt.ptr), reinterpret_cast<int64_t>(p.stream),
                                   view.device().index()};
    held.push_back(cache->get(view, sig, bytes, r.q.options(),
                              [&](void* dst) { ta::pack_bias_term(p, s, backward, dst); }));
    p.bias[s].packed = held.back().data_ptr();
  }
  return held;
}

// No query rows or no keys at all: nothing for the kernels to do (an empty tensor has no data pointer,
// which the plain API refuses), so check everything else with placeholder pointers and let the
// caller fill the results (rows that see no key: output 0, lse -inf).
bool empty_problem(const Prepared& r, bool for_backward) {
  const bool empty = r.g.varlen ? (r.g.total_q == 0 || r.g.total_k == 0) : (r.g.nq == 0 || r.g.nk == 0);
  if (!empty) return false;
  ta::AttentionParams p = r.p;
  static const float placeholder[4] = {};
  for (const void** ptr : {&p.q, &p.k, &p.v, &p.dout})
    if (!*ptr) *ptr = placeholder;
  for (void** ptr : {&p.o, &p.dq, &p.dk, &p.dv})
    if (!*ptr) *ptr = const_cast<float*>(placeholder);
  if (!p.lse) p.lse = const_cast<float*>(placeholder);
  if (!p.workspace) p.workspace = const_cast<float*>(placeholder);  // CUDA's backward asks for one
  for (int t = 0; t < p.num_bias; ++t)
    if (!p.bias[t].ptr) p.bias[t].ptr = placeholder;
  ta::validate(p, for_backward);
  return true;
}

}  // namespace

namespace {

std::tuple<at::Tensor, at::Tensor> forward_impl(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                const Options& o) {
#ifdef TESSERA_TORCH_CUDA
  const c10::OptionalDeviceGuard guard(q.device());
#endif
  Prepared r = prepare(q, k, v, o, false, false);
  ta::AttentionParams& p = r.p;
  at::Tensor out = new_like_layout(r.g, r.g.hq, r.g.dv, r.q);
  at::Tensor lse = r.g.varlen ? at::empty({r.g.hq, r.g.total_q}, r.q.options().dtype(at::kFloat))
                              : at::empty({r.g.batch, r.g.hq, r.g.nq}, r.q.options().dtype(at::kFloat));
  p.o = out.data_ptr();
  strides_of(out, r.g.varlen, &p.o_batch_stride, &p.o_row_stride, &p.o_head_stride);
  p.lse = lse.data_ptr<float>();
  if (empty_problem(r, false)) {
    out.zero_();
    lse.fill_(-std::numeric_limits<float>::infinity());
    return {out, lse};
  }
  set_stream(p, r.q);
  const bool no_grad[2] = {false, false};
  const std::vector<at::Tensor> cached = use_cached_packs(r, o, false, no_grad);
  at::Tensor workspace;  // repacked bias terms (CUDA), from the caching allocator
  if (const size_t ws = ta::forward_workspace_bytes(p)) {
    workspace = at::empty({static_cast<int64_t>(ws)}, r.q.options().dtype(at::kByte));
    p.workspace = workspace.data_ptr();
  }
  ta::forward(p);
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> backward_impl(
    const at::Tensor& dout0, const at::Tensor& dlse0, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out0, const at::Tensor& lse0, const Options& o, bool bias_grad, bool mask_grad) {
#ifdef TESSERA_TORCH_CUDA
  const c10::OptionalDeviceGuard guard(q.device());
#endif
  Prepared r = prepare(q, k, v, o, bias_grad, mask_grad);
  ta::AttentionParams& p = r.p;
  const Geometry& g = r.g;
  // out, lse and their grads come from callers of attention_bwd too: check them as inputs.
  const std::vector<int64_t> out_shape = g.varlen ? std::vector<int64_t>{g.total_q, g.hq, g.dv}
                                                  : std::vector<int64_t>{g.batch, g.nq, g.hq, g.dv};
  const std::vector<int64_t> lse_shape = g.varlen ? std::vector<int64_t>{g.hq, g.total_q}
                                                  : std::vector<int64_t>{g.batch, g.hq, g.nq};
  auto check_like = [&](const at::Tensor& t, const char* name, const std::vector<int64_t>& shape) {
    if (t.sizes() != at::IntArrayRef(shape)) fail(name, " has shape ", t.sizes(), ", expected ", at::IntArrayRef(shape));
    if (t.device() != q.device()) fail(name, " must be on the device of q (", q.device(), "), got ", t.device());
  };
  check_like(out0, "out", out_shape);
  if (out0.scalar_type() != q.scalar_type()) fail("out must have the dtype of q, got ", out0.scalar_type());
  check_like(lse0, "lse", lse_shape);
  if (lse0.scalar_type() != at::kFloat) fail("lse must be float32, got ", lse0.scalar_type());
  if (dout0.defined()) check_like(dout0, "grad of out", out_shape);
  if (dlse0.defined()) check_like(dlse0, "grad of lse", lse_shape);
  const at::Tensor out = last_dim_contiguous(out0);
  const at::Tensor dout = dout0.defined() ? last_dim_contiguous(dout0.to(out.scalar_type())) : at::zeros_like(out);
  const at::Tensor lse = lse0.contiguous();
  p.o = const_cast<void*>(out.data_ptr());
  strides_of(out, g.varlen, &p.o_batch_stride, &p.o_row_stride, &p.o_head_stride);
  p.dout = dout.data_ptr();
  strides_of(dout, g.varlen, &p.do_batch_stride, &p.do_row_stride, &p.do_head_stride);
  p.lse = lse.data_ptr<float>();
  at::Tensor dlse;
  if (dlse0.defined()) {
    dlse = dlse0.to(at::kFloat).contiguous();
    p.dlse = dlse.data_ptr<float>();
  }
  at::Tensor dq = new_like_layout(g, g.hq, g.d, r.q), dk = new_like_layout(g, g.hkv, g.d, r.k),
             dv = new_like_layout(g, g.hkv, g.dv, r.v);
  p.dq = dq.data_ptr();
  p.dk = dk.data_ptr();
  p.dv = dv.data_ptr();
  strides_of(dq, g.varlen, &p.dq_batch_stride, &p.dq_row_stride, &p.dq_head_stride);
  strides_of(dk, g.varlen, &p.dk_batch_stride, &p.dk_row_stride, &p.dk_head_stride);
  strides_of(dv, g.varlen, &p.dv_batch_stride, &p.dv_row_stride, &p.dv_head_stride);
  at::Tensor grads[2];
  const at::Tensor* terms[2] = {&o.bias, &o.mask};
  const bool want[2] = {bias_grad, mask_grad};
  for (int t = 0, slot = 0; t < 2; ++t) {
    if (!terms[t]->defined()) continue;
    if (want[t]) {
      grads[t] = at::empty(r.bias4[slot].sizes(), r.q.options().dtype(at::kFloat));
      p.bias[slot].grad = grads[t].data_ptr<float>();
    }
    ++slot;
  }
  if (empty_problem(r, true)) {  // no attention weights: every gradient is 0
    for (at::Tensor* t : {&dq, &dk, &dv, &grads[0], &grads[1]})
      if (t->defined()) t->zero_();
  } else {
    set_stream(p, r.q);
    const std::vector<at::Tensor> cached = use_cached_packs(r, o, true, want);
    at::Tensor workspace;
    if (const size_t ws = ta::backward_workspace_bytes(p)) {
      workspace = at::empty({static_cast<int64_t>(ws)}, r.q.options().dtype(at::kByte));
      p.workspace = workspace.data_ptr();
    }
    ta::backward(p);
  }
  for (int t = 0; t < 2; ++t)
    if (grads[t].defined()) grads[t] = grads[t].to(terms[t]->scalar_type()).view(terms[t]->sizes());
  return {dq, dk, dv, grads[0], grads[1]};
}

// The CUDA kernels start at head dim 8; Swin UNETR at feature size 12 has 4. Zero columns
// appended to q and k leave every dot product unchanged (the scale is fixed from the true
// head dim first), and zero columns of v only add zero output columns, sliced off again.
constexpr int64_t kCudaMinHeadDim = 8;

bool needs_padding(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  if (!q.is_cuda() || q.dim() < 1 || k.dim() < 1 || v.dim() < 1) return false;
  if (q.size(-1) < 1 || k.size(-1) != q.size(-1) || v.size(-1) < 1) return false;  // geometry() names the error
  return q.size(-1) < kCudaMinHeadDim || v.size(-1) < kCudaMinHeadDim;
}

at::Tensor pad_head_dim(const at::Tensor& t) {
  return t.size(-1) >= kCudaMinHeadDim ? t : at::constant_pad_nd(t, {0, kCudaMinHeadDim - t.size(-1)}, 0);
}

Options with_fixed_scale(const Options& o, int64_t d) {
  Options r = o;
  if (r.scale == 0.0) r.scale = 1.0 / std::sqrt(static_cast<double>(d));
  return r;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                           const Options& o) {
  if (!needs_padding(q, k, v)) return forward_impl(q, k, v, o);
  auto [out, lse] = forward_impl(pad_head_dim(q), pad_head_dim(k), pad_head_dim(v), with_fixed_scale(o, q.size(-1)));
  return {out.narrow(-1, 0, v.size(-1)).contiguous(), lse};  // contiguous, as the unpadded path (and the fake kernel)
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> backward(
    const at::Tensor& dout, const at::Tensor& dlse, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, const Options& o, bool bias_grad, bool mask_grad) {
  if (!needs_padding(q, k, v)) return backward_impl(dout, dlse, q, k, v, out, lse, o, bias_grad, mask_grad);
  auto [dq, dk, dv, db, dm] =
      backward_impl(dout.defined() ? pad_head_dim(dout) : dout, dlse, pad_head_dim(q), pad_head_dim(k), pad_head_dim(v),
                    pad_head_dim(out), lse, with_fixed_scale(o, q.size(-1)), bias_grad, mask_grad);
  return {dq.narrow(-1, 0, q.size(-1)).contiguous(), dk.narrow(-1, 0, k.size(-1)).contiguous(),
          dv.narrow(-1, 0, v.size(-1)).contiguous(), db, dm};
}

}  // namespace tessera::torch_ops::detail
