// Explicit instantiations: f16, head-dim buckets 128.
#include "launch_impl.cuh"

namespace tessera::attention::cuda {
TESSERA_INSTANTIATE(__half, 128)
}  // namespace tessera::attention::cuda
