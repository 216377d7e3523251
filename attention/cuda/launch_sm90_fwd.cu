// Launches of the Hopper forward (kernels/sm90/fwd_sm90_kernel.cuh) for fp16 / bf16 at the
// 64, 128 and 256 head-dim buckets, in the configuration dispatch.cu chose (tile_configs.cuh).
// Compiled for every architecture; the kernel body exists only in the sm_90a image, and
// dispatch.cu chooses it only when that image was built (TESSERA_SM90A) and the device is
// compute 9.0.
#include "launch_sm90.cuh"

namespace tessera::attention::cuda {

template <typename T, int D>
void launch_fwd_sm90(const KArgs& a, const Choice& c, cudaStream_t st) {
  if constexpr (D == 64) {
    if (c.kernel == Kernel::sm90_forward_row208) launch_fwd_sm90_cfg<Fwd90Of<T, 64, Fwd90Tile64Row208>>(a, st);
    else if (c.kernel == Kernel::sm90_forward_wide) launch_fwd_sm90_cfg<Fwd90Of<T, 64, Fwd90Tile64Wide>>(a, st);
    else launch_fwd_sm90_cfg<Fwd90Of<T, 64, Fwd90Tile64>>(a, st);
  } else if constexpr (D == 256) {
    launch_fwd_sm90_cfg<Fwd90Of<T, 256, Fwd90Tile256>>(a, st);
  } else {
    if (c.kernel == Kernel::sm90_forward_persistent) launch_fwd_sm90_cfg<Fwd90Of<T, 128, Fwd90Tile128Persistent>>(a, st);
    else launch_fwd_sm90_cfg<Fwd90Of<T, 128, Fwd90Tile128>>(a, st);
  }
}

template void launch_fwd_sm90<__nv_bfloat16, 64>(const KArgs&, const Choice&, cudaStream_t);
template void launch_fwd_sm90<__nv_bfloat16, 128>(const KArgs&, const Choice&, cudaStream_t);
template void launch_fwd_sm90<__half, 64>(const KArgs&, const Choice&, cudaStream_t);
template void launch_fwd_sm90<__half, 128>(const KArgs&, const Choice&, cudaStream_t);
template void launch_fwd_sm90<__nv_bfloat16, 256>(const KArgs&, const Choice&, cudaStream_t);
template void launch_fwd_sm90<__half, 256>(const KArgs&, const Choice&, cudaStream_t);

}  // namespace tessera::attention::cuda
