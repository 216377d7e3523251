#include "tessera/models/instance_norm.h"

#include <torch/torch.h>

#include "kernel_binding.h"
#include "tessera/models/fused_layers.h"

#ifdef TESSERA_MODELS_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "instance_norm.h"
#endif

namespace tessera::models {
namespace {

constexpr double kEps = 1e-5;

torch::Tensor plain_instance_norm(const torch::Tensor& x) {
  return torch::instance_norm(x, {}, {}, {}, {}, /*use_input_stats=*/true, 0.1, kEps, /*cudnn_enabled=*/false);
}

}  // namespace

bool instance_norm_fused(const torch::Tensor& x, const torch::Tensor& residual) {
  return fused_layers_available(x) && x.dim() >= 3 && detail::kernel_partner(x, residual);
}

torch::Tensor instance_norm_act(const torch::Tensor& x, const torch::Tensor& residual, bool normalize_residual,
                                std::optional<double> leaky_slope) {
  TORCH_CHECK(!normalize_residual || residual.defined(), "instance_norm_act: normalize_residual without a residual");
#ifdef TESSERA_MODELS_CUDA
  if (instance_norm_fused(x, residual)) {
    const c10::cuda::CUDAGuard guard(x.device());
    const torch::Tensor xc = x.contiguous();
    const torch::Tensor rc = residual.defined() ? residual.contiguous() : residual;
    torch::Tensor y = torch::empty_like(xc);
    cuda::InstanceNormArgs a;
    a.dtype = detail::kernel_dtype(x);
    a.x = xc.data_ptr();
    a.y = y.data_ptr();
    a.residual = rc.defined() ? rc.data_ptr() : nullptr;
    a.normalize_residual = normalize_residual;
    a.planes = x.size(0) * x.size(1);
    a.size = a.planes ? x.numel() / a.planes : 0;
    a.eps = static_cast<float>(kEps);
    a.leaky_relu = leaky_slope.has_value();
    a.slope = static_cast<float>(leaky_slope.value_or(0.0));
    const torch::Tensor ws = torch::empty({std::max<int64_t>(cuda::workspace_floats(a.planes, a.size, normalize_residual), 1)},
                                          x.options().dtype(torch::kFloat));
    a.workspace = ws.data_ptr<float>();
    a.stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
    cuda::instance_norm(a);
    return y;
  }
#endif
  torch::Tensor out = plain_instance_norm(x);
  if (residual.defined()) out = out + (normalize_residual ? plain_instance_norm(residual) : residual);
  // In place: `out` is always a fresh temporary here, so LeakyReLU needs no allocation of its own.
  if (leaky_slope) torch::leaky_relu_(out, *leaky_slope);
  return out;
}

}  // namespace tessera::models
