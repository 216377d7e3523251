// Explicit instantiations: bf16, head-dim buckets 128.
#include "launch_impl.cuh"

namespace tessera::attention::cuda {
TESSERA_INSTANTIATE(__nv_bfloat16, 128)
}  // namespace tessera::attention::cuda
