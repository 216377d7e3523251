// Explicit instantiations: bf16, head-dim buckets 16 32 64.
#include "launch_impl.cuh"

namespace tessera::attention::cuda {
TESSERA_INSTANTIATE(__nv_bfloat16, 16)
TESSERA_INSTANTIATE(__nv_bfloat16, 32)
TESSERA_INSTANTIATE(__nv_bfloat16, 64)
}  // namespace tessera::attention::cuda
