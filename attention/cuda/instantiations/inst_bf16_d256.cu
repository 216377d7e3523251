// Explicit instantiations: bf16, head-dim buckets 256.
#include "launch_impl.cuh"

namespace tessera::attention::cuda {
TESSERA_INSTANTIATE(__nv_bfloat16, 256)
}  // namespace tessera::attention::cuda
