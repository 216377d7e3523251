// Launch of the Hopper forward (fwd_sm90_kernel.cuh) with any FwdSm90Traits,
// with the TMA tensor maps of Q, K and V: inst_sm90.cu instantiates the
// shipping configurations, bench/attention_cuda_tune.cu times alternatives.
// The kernel body exists only in an sm_90a image (TESSERA_SM90A): launch it
// on compute 9.0 devices only.
#pragma once

#include "fwd_sm90_kernel.cuh"
#include "launch_impl.cuh"
#include "tensor_map.cuh"

namespace tessera::attention::cuda {

// The forward with traits Tr = sm90::FwdSm90Traits<T, D, BN, STAGES, NCONS, PINGPONG>:
// Q boxes of Tr::BM rows (one per CTA), K / V boxes of Tr::BN rows (one key block).
template <typename Tr>
void launch_fwd_sm90_cfg(const KArgs& a, cudaStream_t st) {
  const AttentionParams& p = a.p;
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t rq = varlen ? p.total_q : p.seqlen_q, rk = varlen ? p.total_k : p.seqlen_k;
  const int nb = varlen ? 1 : p.batch;
  sm90::FwdMaps maps;
  maps.q = make_map(p.q, p.dtype, p.head_dim, rq, p.heads_q, nb, p.q_row_stride, p.q_head_stride, p.q_batch_stride, Tr::BM);
  maps.k = make_map(p.k, p.dtype, p.head_dim, rk, p.heads_kv, nb, p.k_row_stride, p.k_head_stride, p.k_batch_stride, Tr::BN);
  maps.v = make_map(p.v, p.dtype, p.head_dim_v, rk, p.heads_kv, nb, p.v_row_stride, p.v_head_stride, p.v_batch_stride,
                    Tr::BN);
  dim3 grid((p.seqlen_q + Tr::BM - 1) / Tr::BM, p.heads_q, p.batch);
  auto kernel = sm90::fwd_sm90_kernel<typename Tr::Elt, Tr>;
  set_smem(kernel, Tr::kSmem);
  kernel<<<grid, Tr::NTHREADS, Tr::kSmem, st>>>(a, maps);
  check_cuda(cudaGetLastError(), "sm90 forward launch");
}

}  // namespace tessera::attention::cuda
