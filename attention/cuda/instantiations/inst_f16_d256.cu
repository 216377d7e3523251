// Explicit instantiations: f16, head-dim buckets 256.
#include "launch_impl.cuh"

namespace tessera::attention::cuda {
TESSERA_INSTANTIATE(__half, 256)
}  // namespace tessera::attention::cuda
