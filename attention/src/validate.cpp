// Every check on AttentionParams, in one place, before any backend runs.
// Each failure names the argument and the value that is wrong.
#include <sstream>
#include <string>

#include "tessera/attention/attention.h"
#include "tessera/attention/layout.h"

namespace tessera::attention {
namespace {

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  std::ostringstream os;
  os << "tessera attention: ";
  (os << ... << args);
  throw Error(os.str());
}

void check_tensor(const char* name, const void* ptr, int64_t bs, int64_t rs, int64_t hs, bool varlen) {
  if (!ptr) fail(name, " is null");
  if (rs <= 0) fail(name, " row stride must be positive, got ", rs);
  if (hs < 0) fail(name, " head stride must be >= 0, got ", hs);
  if (!varlen && bs < 0) fail(name, " batch stride must be >= 0, got ", bs);
}

void check_cu_seqlens(const char* name, const int32_t* cu, int batch, int total, int max_len, bool on_host) {
  if (!on_host) return;  // device-resident offsets are checked by the binding layer before upload
  if (cu[0] != 0) fail(name, "[0] must be 0, got ", cu[0]);
  for (int b = 0; b < batch; ++b) {
    const int64_t len = static_cast<int64_t>(cu[b + 1]) - cu[b];
    if (len < 0) fail(name, " must be non-decreasing, but ", name, "[", b + 1, "] = ", cu[b + 1], " < ", cu[b]);
    if (len > max_len) fail(name, ": sequence ", b, " has length ", len, " > max_seqlen ", max_len);
  }
  if (cu[batch] != total) fail(name, "[", batch, "] = ", cu[batch], " but the packed tensor has ", total, " rows");
}

}  // namespace

void validate_cu_seqlens(const int32_t* cu_q, const int32_t* cu_k, int batch, int total_q, int total_k, int max_q,
                         int max_k) {
  if (batch < 1) fail("cu_seqlens need at least 2 entries (batch + 1), got ", batch + 1);
  check_cu_seqlens("cu_seqlens_q", cu_q, batch, total_q, max_q, true);
  check_cu_seqlens("cu_seqlens_k", cu_k, batch, total_k, max_k, true);
}

void validate(const AttentionParams& p, bool for_backward) {
  if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16) fail("unsupported dtype");
  if (p.batch < 1) fail("batch must be >= 1, got ", p.batch);
  // The CUDA kernels put the batch on the grid's z dimension.
  if (p.device == Device::cuda && p.batch > 65535)
    fail("batch ", p.batch, " exceeds the CUDA kernels' 65535 sequences per call: split it into several calls");
  if (p.heads_q < 1 || p.heads_kv < 1) fail("head counts must be >= 1, got heads_q=", p.heads_q, " heads_kv=", p.heads_kv);
  if (p.heads_q % p.heads_kv != 0)
    fail("heads_q (", p.heads_q, ") must be a multiple of heads_kv (", p.heads_kv, ") for MQA/GQA");
  const int max_d = 256;
  const int min_d = p.device == Device::cuda ? 8 : 1;
  if (p.head_dim < min_d || p.head_dim > max_d)
    fail("head_dim must be in [", min_d, ", ", max_d, "], got ", p.head_dim);
  if (p.head_dim_v < min_d || p.head_dim_v > max_d)
    fail("head_dim_v must be in [", min_d, ", ", max_d, "], got ", p.head_dim_v);
  if (p.seqlen_q < 0 || p.seqlen_k < 0) fail("sequence lengths must be >= 0");
  if (!(p.scale == p.scale) || p.scale == 0.f) fail("softmax scale must be a finite non-zero number, got ", p.scale);

  const bool varlen = p.cu_seqlens_q != nullptr;
  if (varlen != (p.cu_seqlens_k != nullptr)) fail("cu_seqlens_q and cu_seqlens_k must be given together");
  if (varlen) {
    const bool host = p.device == Device::cpu;
    check_cu_seqlens("cu_seqlens_q", p.cu_seqlens_q, p.batch, p.total_q, p.seqlen_q, host);
    check_cu_seqlens("cu_seqlens_k", p.cu_seqlens_k, p.batch, p.total_k, p.seqlen_k, host);
  }
  check_tensor("q", p.q, p.q_batch_stride, p.q_row_stride, p.q_head_stride, varlen);
  check_tensor("k", p.k, p.k_batch_stride, p.k_row_stride, p.k_head_stride, varlen);
  check_tensor("v", p.v, p.v_batch_stride, p.v_row_stride, p.v_head_stride, varlen);
  check_tensor("o", p.o, p.o_batch_stride, p.o_row_stride, p.o_head_stride, varlen);
  if (p.q_head_stride < p.head_dim && p.heads_q > 1) fail("q head stride ", p.q_head_stride, " overlaps the head dim ", p.head_dim);
  if (p.o_head_stride < p.head_dim_v && p.heads_q > 1) fail("o head stride ", p.o_head_stride, " overlaps the head dim ", p.head_dim_v);
  if (!p.lse) fail("lse output is null (the backward needs it)");

  if (p.causal && p.window_right > 0)
    fail("causal attention cannot look right: window_right must be -1 or 0 with causal, got ", p.window_right);
  if (p.window_left < -1 || p.window_right < -1)
    fail("window sizes must be >= 0 or -1 (unbounded), got (", p.window_left, ", ", p.window_right, ")");

  if (p.num_bias < 0 || p.num_bias > 2) fail("num_bias must be 0, 1 or 2, got ", p.num_bias);
  for (int t = 0; t < p.num_bias; ++t) {
    const BiasTerm& b = p.bias[t];
    if (!b.ptr) fail("bias[", t, "] is null");
    if (b.batch_mod < 1 || b.head_mod < 1) fail("bias[", t, "] batch_mod/head_mod must be >= 1");
    if (p.batch % b.batch_mod != 0)
      fail("bias[", t, "] has ", b.batch_mod, " batch slices, which does not divide the batch of ", p.batch);
    if (p.heads_q % b.head_mod != 0)
      fail("bias[", t, "] has ", b.head_mod, " head slices, which does not divide heads_q=", p.heads_q);
    if (b.batch_mod > 1 && b.batch_stride <= 0) fail("bias[", t, "] batch stride must be > 0 with several batch slices");
    if (b.head_mod > 1 && b.head_stride <= 0) fail("bias[", t, "] head stride must be > 0 with several head slices");
    if (b.row_stride < 0 || b.batch_stride < 0 || b.head_stride < 0) fail("bias[", t, "] strides must be >= 0");
    if (b.packed && p.device != Device::cuda) fail("bias[", t, "] has a packed copy, which only the CUDA path reads");
    if (reinterpret_cast<uintptr_t>(b.packed) % 16 != 0) fail("bias[", t, "] packed copy must be 16-byte aligned");
  }
  if (!(p.dropout_p >= 0.f && p.dropout_p < 1.f)) fail("dropout_p must be in [0, 1), got ", p.dropout_p);

  if (!for_backward) return;
  check_tensor("dout", p.dout, p.do_batch_stride, p.do_row_stride, p.do_head_stride, varlen);
  check_tensor("dq", p.dq, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride, varlen);
  check_tensor("dk", p.dk, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride, varlen);
  check_tensor("dv", p.dv, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride, varlen);
  if (p.device == Device::cuda && backward_workspace_bytes(p) > 0 && !p.workspace)
    fail("backward needs ", backward_workspace_bytes(p), " bytes of workspace and none was given");
}

}  // namespace tessera::attention
