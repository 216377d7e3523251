// Device dispatch: validate once, then hand the params to a backend.
#include "tessera/attention/attention.h"

#include "cpu/cpu_backend.h"
#ifdef TESSERA_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace tessera::attention {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
  }
  return "?";
}

int dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }

void forward(const AttentionParams& p) {
  validate(p, false);
  if (p.device == Device::cpu) return cpu::forward(p);
#ifdef TESSERA_WITH_CUDA
  return cuda::forward(p);
#else
  throw Error("tessera attention: CUDA tensors given but this build has no CUDA kernels");
#endif
}

void backward(const AttentionParams& p) {
  validate(p, true);
  if (p.device == Device::cpu) return cpu::backward(p);
#ifdef TESSERA_WITH_CUDA
  return cuda::backward(p);
#else
  throw Error("tessera attention: CUDA tensors given but this build has no CUDA kernels");
#endif
}

size_t backward_workspace_bytes(const AttentionParams& p) {
#ifdef TESSERA_WITH_CUDA
  if (p.device == Device::cuda) return cuda::backward_workspace_bytes(p);
#endif
  return 0;
}

size_t forward_workspace_bytes(const AttentionParams& p) {
#ifdef TESSERA_WITH_CUDA
  if (p.device == Device::cuda) return cuda::forward_workspace_bytes(p);
#endif
  return 0;
}

size_t packed_bias_term_bytes(const AttentionParams& p, int t, bool backward) {
  if (t < 0 || t >= p.num_bias) throw Error("packed_bias_term_bytes: no bias term " + std::to_string(t));
#ifdef TESSERA_WITH_CUDA
  if (p.device == Device::cuda) return cuda::packed_term_bytes(p, t, backward);
#endif
  (void)backward;
  return 0;
}

void pack_bias_term(const AttentionParams& p, int t, bool backward, void* dst) {
  if (packed_bias_term_bytes(p, t, backward) == 0)
    throw Error("pack_bias_term: bias term " + std::to_string(t) + " is not read packed by this pass");
  if (!dst || reinterpret_cast<uintptr_t>(dst) % 16 != 0)
    throw Error("pack_bias_term: the destination must be 16-byte aligned device memory");
#ifdef TESSERA_WITH_CUDA
  cuda::pack_term(p, t, backward, dst);
#endif
}

const char* cpu_isa() { return cpu::isa_name(); }

bool cuda_compiled() {
#ifdef TESSERA_WITH_CUDA
  return true;
#else
  return false;
#endif
}

bool cuda_available() {
#ifdef TESSERA_WITH_CUDA
  return cuda::available();
#else
  return false;
#endif
}

std::string cuda_device_name(int device) {
#ifdef TESSERA_WITH_CUDA
  return cuda::available() ? cuda::device_name(device) : std::string();
#else
  return std::string();
#endif
}

}  // namespace tessera::attention
