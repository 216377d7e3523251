// Launches of the Hopper forward (fwd_sm90_kernel.cuh) for fp16 / bf16 at the
// 64 and 128 head-dim buckets. Compiled for every architecture; the kernel
// body exists only in the sm_90a image, and the dispatcher launches it only
// when that image was built (TESSERA_SM90A) and the device is compute 9.0.
#include "fwd_sm90_kernel.cuh"
#include "launch_impl.cuh"

#include <cstdlib>

namespace tessera::attention::cuda {

template <typename Tr>
void launch_fwd_sm90_cfg(const KArgs& a, cudaStream_t st) {
  const AttentionParams& p = a.p;
  dim3 grid((p.seqlen_q + Tr::BM - 1) / Tr::BM, p.heads_q, p.batch);
  auto kernel = sm90::fwd_sm90_kernel<typename Tr::Elt, Tr>;
  set_smem(kernel, Tr::kSmem);
  kernel<<<grid, Tr::NTHREADS, Tr::kSmem, st>>>(a);
  check_cuda(cudaGetLastError(), "sm90 forward launch");
}

// Tile configurations (key block, warpgroups per CTA, CTAs per SM the
// registers must allow). TESSERA_SM90_FWD_CFG picks a variant for tuning runs.
template <typename T, int D>
void launch_fwd_sm90(const KArgs& a, cudaStream_t st) {
  const char* e = std::getenv("TESSERA_SM90_FWD_CFG");
  const int cfg = e ? std::atoi(e) : 0;
  if constexpr (D == 64) {
    if (cfg == 1) return launch_fwd_sm90_cfg<sm90::FwdSm90Traits<T, 64, 128, 2, 1>>(a, st);
    if (cfg == 2) return launch_fwd_sm90_cfg<sm90::FwdSm90Traits<T, 64, 64, 1, 3>>(a, st);
    return launch_fwd_sm90_cfg<sm90::FwdSm90Traits<T, 64, 128, 1, 3>>(a, st);
  } else {
    if (cfg == 1) return launch_fwd_sm90_cfg<sm90::FwdSm90Traits<T, 128, 128, 2, 1>>(a, st);
    if (cfg == 2) return launch_fwd_sm90_cfg<sm90::FwdSm90Traits<T, 128, 128, 1, 1>>(a, st);
    return launch_fwd_sm90_cfg<sm90::FwdSm90Traits<T, 128, 64, 1, 2>>(a, st);
  }
}

template void launch_fwd_sm90<__nv_bfloat16, 64>(const KArgs&, cudaStream_t);
template void launch_fwd_sm90<__nv_bfloat16, 128>(const KArgs&, cudaStream_t);
template void launch_fwd_sm90<__half, 64>(const KArgs&, cudaStream_t);
template void launch_fwd_sm90<__half, 128>(const KArgs&, cudaStream_t);

}  // namespace tessera::attention::cuda
