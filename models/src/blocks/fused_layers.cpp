#include "tessera/models/fused_layers.h"

#include <torch/torch.h>

#include "kernel_binding.h"

#ifdef TESSERA_MODELS_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "glu.h"
#include "residual_norm.h"
#endif

namespace tessera::models {
namespace {

#ifdef TESSERA_MODELS_CUDA
// A parameter as the kernel reads it: x's dtype and device, contiguous (undefined stays undefined).
torch::Tensor as_param(const torch::Tensor& p, const torch::Tensor& x) {
  return p.defined() ? p.to(x.device(), x.scalar_type()).contiguous() : p;
}

const void* ptr(const torch::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
#endif

}  // namespace

bool fused_layers_available(const torch::Tensor& x) {
#ifdef TESSERA_MODELS_CUDA
  const auto t = x.scalar_type();
  return x.is_cuda() && !(torch::GradMode::is_enabled() && x.requires_grad()) &&
         (t == torch::kFloat || t == torch::kHalf || t == torch::kBFloat16);
#else
  (void)x;
  return false;
#endif
}

torch::Tensor add_and_norm_(torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& gamma,
                            const torch::nn::LayerNorm& norm) {
  const int64_t C = x.size(-1);
#ifdef TESSERA_MODELS_CUDA
  if (fused_layers_available(x) && detail::kernel_partner(x, y) && x.is_contiguous() && C <= cuda::kResidualNormMaxCols) {
    const c10::cuda::CUDAGuard guard(x.device());
    const torch::Tensor yc = y.defined() ? y.contiguous() : y;
    const torch::Tensor g = as_param(gamma, x);
    const torch::Tensor w = norm ? as_param(norm->weight, x) : torch::Tensor();
    const torch::Tensor b = norm ? as_param(norm->bias, x) : torch::Tensor();
    torch::Tensor out = norm ? torch::empty_like(x) : torch::Tensor();
    cuda::ResidualNormArgs a;
    a.dtype = detail::kernel_dtype(x);
    a.x = x.data_ptr();
    a.y = ptr(yc);
    a.gamma = ptr(g);
    a.weight = ptr(w);
    a.bias = ptr(b);
    a.out = out.defined() ? out.data_ptr() : nullptr;
    a.rows = C ? x.numel() / C : 0;
    a.cols = C;
    a.eps = static_cast<float>(norm ? norm->options.eps() : 1e-5);
    a.stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
    cuda::residual_norm(a);
    return out;
  }
#endif
  if (y.defined()) x.add_(gamma.defined() ? y * gamma : y);
  return norm ? torch::layer_norm(x, {C}, norm->weight, norm->bias, norm->options.eps()) : torch::Tensor();
}

torch::Tensor packed_glu(const torch::Tensor& h, bool silu) {
  const int64_t two_n = h.size(-1);
  TORCH_CHECK(two_n % 2 == 0, "packed_glu: the last dimension must be even, got ", h.sizes());
#ifdef TESSERA_MODELS_CUDA
  if (fused_layers_available(h)) {
    const c10::cuda::CUDAGuard guard(h.device());
    const torch::Tensor hc = h.contiguous();
    auto sizes = h.sizes().vec();
    sizes.back() = two_n / 2;
    torch::Tensor out = torch::empty(sizes, h.options());
    cuda::GluArgs a;
    a.dtype = detail::kernel_dtype(h);
    a.act = silu ? cuda::GluAct::silu : cuda::GluAct::gelu;
    a.h = hc.data_ptr();
    a.out = out.data_ptr();
    a.hidden = two_n / 2;
    a.rows = a.hidden ? h.numel() / two_n : 0;
    a.stream = c10::cuda::getCurrentCUDAStream(h.device().index()).stream();
    cuda::packed_glu(a);
    return out;
  }
#endif
  const auto halves = h.chunk(2, -1);
  return (silu ? torch::silu(halves[0]) : torch::gelu(halves[0])) * halves[1];
}

}  // namespace tessera::models
