// The element types the fused model kernels take (plain CUDA, no LibTorch: bindings map tensors to these).
#pragma once

namespace tessera::models::cuda {

enum class DType { f32, f16, bf16 };

}  // namespace tessera::models::cuda
