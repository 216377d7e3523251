// Explicit instantiations: f16, head-dim buckets 16 32 64.
#include "launch_impl.cuh"

namespace tessera::attention::cuda {
TESSERA_INSTANTIATE(__half, 16)
TESSERA_INSTANTIATE(__half, 32)
TESSERA_INSTANTIATE(__half, 64)
}  // namespace tessera::attention::cuda
