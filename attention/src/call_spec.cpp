// Params from words (call_spec.h), for the dispatch's explanation and its table test.
#include "tessera/attention/call_spec.h"

#include <cmath>
#include <sstream>

#include "tessera/attention/attention.h"
#ifdef TESSERA_WITH_CUDA
#include "cuda/dispatch.h"
#endif

namespace tessera::attention {

namespace {

alignas(256) char g_placeholder[1024];
int32_t g_cu_seqlens[64];
float g_floats[64];

int number(const std::string& word, const std::string& value) {
  size_t used = 0;
  int n = -1;
  try {
    n = std::stoi(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || n < 0) throw Error("attention call '" + word + "': not a count");
  return n;
}

}  // namespace

AttentionParams call_spec_params(const std::string& spec) {
  AttentionParams p;
  p.device = Device::cuda;
  p.dtype = DType::bf16;
  p.batch = 2;
  p.heads_q = p.heads_kv = 4;
  p.head_dim = 64;
  p.seqlen_q = p.seqlen_k = 1024;
  int dv = -1, hkv = -1, window = -1;
  bool varlen = false, bias = false, bias_f32 = false, bias_grad = false, unaligned = false, no_ws = false;
  std::istringstream in(spec);
  for (std::string w; in >> w;) {
    const size_t eq = w.find('=');
    const std::string key = w.substr(0, eq), value = eq == std::string::npos ? "" : w.substr(eq + 1);
    if (key == "dtype" && (value == "bf16" || value == "f16" || value == "f32"))
      p.dtype = value == "bf16" ? DType::bf16 : value == "f16" ? DType::f16 : DType::f32;
    else if (key == "d" && eq != std::string::npos) p.head_dim = number(w, value);
    else if (key == "dv" && eq != std::string::npos) dv = number(w, value);
    else if (key == "nq" && eq != std::string::npos) p.seqlen_q = number(w, value);
    else if (key == "nk" && eq != std::string::npos) p.seqlen_k = number(w, value);
    else if (key == "b" && eq != std::string::npos) p.batch = std::max(1, std::min(number(w, value), 62));
    else if (key == "h" && eq != std::string::npos) p.heads_q = number(w, value);
    else if (key == "hkv" && eq != std::string::npos) hkv = number(w, value);
    else if (key == "window") window = eq == std::string::npos ? 256 : number(w, value);
    else if (w == "gqa") p.heads_q = 8, hkv = 2;
    else if (w == "causal") p.causal = true;
    else if (w == "varlen") varlen = true;
    else if (w == "bias") bias = true;
    else if (w == "bias_f32") bias = bias_f32 = true;
    else if (w == "bias_grad") bias = bias_grad = true;
    else if (w == "alibi") p.alibi_slopes = g_floats;
    else if (w == "dropout") p.dropout_p = 0.1f;
    else if (w == "deterministic") p.deterministic = true;
    else if (w == "unaligned") unaligned = true;
    else if (w == "no_ws") no_ws = true;
    else throw Error("attention call: unknown word '" + w + "' (docs/attention.md lists them)");
  }
  p.head_dim_v = dv >= 0 ? dv : p.head_dim;
  p.heads_kv = hkv >= 0 ? hkv : p.heads_q;
  p.window_left = window;
  p.scale = p.head_dim > 0 ? 1.f / std::sqrt(static_cast<float>(p.head_dim)) : 1.f;
  void* base = g_placeholder;
  p.q = unaligned ? g_placeholder + 2 : base;
  p.k = p.v = p.dout = base;
  p.o = p.dq = p.dk = p.dv = base;
  p.lse = g_floats;
  const int64_t d = p.head_dim, dvv = p.head_dim_v;
  // contiguous [B, N, H, D] tensors
  p.q_head_stride = p.k_head_stride = p.dq_head_stride = p.dk_head_stride = d;
  p.v_head_stride = p.o_head_stride = p.do_head_stride = p.dv_head_stride = dvv;
  p.q_row_stride = p.dq_row_stride = p.heads_q * d;
  p.o_row_stride = p.do_row_stride = p.heads_q * dvv;
  p.k_row_stride = p.dk_row_stride = p.heads_kv * d;
  p.v_row_stride = p.dv_row_stride = p.heads_kv * dvv;
  p.q_batch_stride = p.dq_batch_stride = p.seqlen_q * p.q_row_stride;
  p.o_batch_stride = p.do_batch_stride = p.seqlen_q * p.o_row_stride;
  p.k_batch_stride = p.dk_batch_stride = p.seqlen_k * p.k_row_stride;
  p.v_batch_stride = p.dv_batch_stride = p.seqlen_k * p.v_row_stride;
  if (varlen) {  // every sequence at the full lengths
    for (int b = 0; b <= p.batch; ++b) g_cu_seqlens[b] = b * p.seqlen_q, g_cu_seqlens[32 + b] = b * p.seqlen_k;
    p.cu_seqlens_q = g_cu_seqlens;
    p.cu_seqlens_k = g_cu_seqlens + 32;
    p.total_q = p.batch * p.seqlen_q;
    p.total_k = p.batch * p.seqlen_k;
  }
  if (bias) {  // a relative-position bias [H, Nq, Nk] shared by the batch
    BiasTerm& t = p.bias[p.num_bias++];
    t.ptr = base;
    t.dtype = bias_f32 ? DType::f32 : p.dtype;
    t.head_stride = int64_t(p.seqlen_q) * p.seqlen_k;
    t.row_stride = p.seqlen_k;
    t.head_mod = std::max(1, p.heads_q);
    if (bias_grad) t.grad = g_floats;
  }
  if (!no_ws) p.workspace = base;
  return p;
}

std::string explain_cuda_dispatch(const std::string& spec, const std::vector<std::string>& overrides, int arch) {
#ifdef TESSERA_WITH_CUDA
  const AttentionParams p = call_spec_params(spec);
  cuda::Overrides ov;
  for (const std::string& o : overrides) {
    try {
      cuda::apply_override(ov, o);
    } catch (const std::invalid_argument& e) {
      throw Error(e.what());
    }
  }
  return cuda::explain(p, ov, arch);
#else
  (void)spec, (void)overrides, (void)arch;
  throw Error("tessera attention: this build has no CUDA kernels to explain");
#endif
}

}  // namespace tessera::attention
