// Launches of the Hopper forward (fwd_sm90_kernel.cuh) for fp16 / bf16 at the
// 64 and 128 head-dim buckets, with the TMA tensor maps of Q, K and V.
// Compiled for every architecture; the kernel body exists only in the sm_90a
// image, and the dispatcher launches it only when that image was built
// (TESSERA_SM90A) and the device is compute 9.0.
#include "fwd_sm90_kernel.cuh"
#include "launch_impl.cuh"
#include "tensor_map.cuh"

namespace tessera::attention::cuda {
namespace {

template <typename Tr>
void launch_cfg(const KArgs& a, cudaStream_t st) {
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

}  // namespace

// Tile configurations (key block, pipeline stages), measured on the H200
// against the alternatives in bench/CUDA_NOTES.md ("Hopper forward").
template <typename T, int D>
void launch_fwd_sm90(const KArgs& a, cudaStream_t st) {
  if constexpr (D == 64) launch_cfg<sm90::FwdSm90Traits<T, 64, 128, 4>>(a, st);
  else launch_cfg<sm90::FwdSm90Traits<T, 128, 128, 3>>(a, st);
}

template void launch_fwd_sm90<__nv_bfloat16, 64>(const KArgs&, cudaStream_t);
template void launch_fwd_sm90<__nv_bfloat16, 128>(const KArgs&, cudaStream_t);
template void launch_fwd_sm90<__half, 64>(const KArgs&, cudaStream_t);
template void launch_fwd_sm90<__half, 128>(const KArgs&, cudaStream_t);

}  // namespace tessera::attention::cuda
