// Launches of the Hopper backward (bwd_sm90_kernel.cuh) for fp16 / bf16 at the
// 64 and 128 head-dim buckets, with the TMA tensor maps of Q, K, V and dO.
// Like inst_sm90.cu: compiled for every architecture, launched only on
// compute 9.0 from a build with the sm_90a image (sm90_backward_eligible).
#include "bwd_sm90_kernel.cuh"
#include "launch_impl.cuh"
#include "tensor_map.cuh"

namespace tessera::attention::cuda {
namespace {

template <typename Tr>
void launch_cfg(const KArgs& a, cudaStream_t st) {
  const AttentionParams& p = a.p;
  sm90::BwdMaps maps;
  maps.q = map_q(p, Tr::BM);
  maps.dout = map_dout(p, Tr::BM);
  maps.k = map_k(p, Tr::BN);
  maps.v = map_v(p, Tr::BN);
  if (a.dq_accum) {
    const int64_t rows = p.cu_seqlens_q ? p.total_q : static_cast<int64_t>(p.batch) * p.seqlen_q;
    maps.dq = map_dq_accum(a.dq_accum, a.dq_accum_d, p.heads_q, rows);
  }
  dim3 grid((p.seqlen_k + Tr::BN - 1) / Tr::BN, p.heads_kv, p.batch);
  auto kernel = sm90::bwd_sm90_kernel<typename Tr::Elt, Tr>;
  set_smem(kernel, Tr::kSmem);
  kernel<<<grid, Tr::NTHREADS, Tr::kSmem, st>>>(a, maps);
  check_cuda(cudaGetLastError(), "sm90 backward launch");
}

}  // namespace

// d128: 64 queries per step (dQ split by columns); d64: 128 (dQ split by rows).
template <typename T, int D>
void launch_bwd_sm90(const KArgs& a, cudaStream_t st) {
  if constexpr (D == 64) launch_cfg<sm90::BwdSm90Traits<T, 64, 128>>(a, st);
  else launch_cfg<sm90::BwdSm90Traits<T, 128, 64>>(a, st);
}

template void launch_bwd_sm90<__nv_bfloat16, 64>(const KArgs&, cudaStream_t);
template void launch_bwd_sm90<__nv_bfloat16, 128>(const KArgs&, cudaStream_t);
template void launch_bwd_sm90<__half, 64>(const KArgs&, cudaStream_t);
template void launch_bwd_sm90<__half, 128>(const KArgs&, cudaStream_t);

}  // namespace tessera::attention::cuda
