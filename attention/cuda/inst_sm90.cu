// Launches of the Hopper forward (fwd_sm90_kernel.cuh) for fp16 / bf16 at the
// 64 and 128 head-dim buckets (tensor maps and launch: launch_sm90.cuh).
// Compiled for every architecture; the kernel body exists only in the sm_90a
// image, and the dispatcher launches it only when that image was built
// (TESSERA_SM90A) and the device is compute 9.0.
#include "launch_sm90.cuh"

namespace tessera::attention::cuda {

// The shipping tile configuration per head-dim bucket, measured on the H200
// against the alternatives in bench/CUDA_NOTES.md ("Hopper forward");
// bench/attention_cuda_tune.cu times candidates (switch here).
template <typename T, int D> struct FwdSm90Cfg;
//                                                          D   BN STAGES NCONS PINGPONG
template <typename T> struct FwdSm90Cfg<T, 64> { using type = sm90::FwdSm90Traits<T, 64, 128, 4, 2, true>; };
template <typename T> struct FwdSm90Cfg<T, 128> { using type = sm90::FwdSm90Traits<T, 128, 128, 3, 2, true>; };

template <typename T, int D>
void launch_fwd_sm90(const KArgs& a, cudaStream_t st) {
  launch_fwd_sm90_cfg<typename FwdSm90Cfg<T, D>::type>(a, st);
}

template void launch_fwd_sm90<__nv_bfloat16, 64>(const KArgs&, cudaStream_t);
template void launch_fwd_sm90<__nv_bfloat16, 128>(const KArgs&, cudaStream_t);
template void launch_fwd_sm90<__half, 64>(const KArgs&, cudaStream_t);
template void launch_fwd_sm90<__half, 128>(const KArgs&, cudaStream_t);

}  // namespace tessera::attention::cuda
