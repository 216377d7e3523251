#include "compute_options.h"

#include <stdexcept>

namespace tessera::apps {

void add_compute_options(CLI::App* cmd, ComputeOptions& o, const char* precision_help) {
  cmd->add_option("--device", o.device, "cpu or cuda")->capture_default_str()->check(CLI::IsMember({"cpu", "cuda"}));
  if (precision_help)
    cmd->add_option("--precision", o.precision, precision_help)->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
}

Compute resolve_compute(const ComputeOptions& o, const std::string& default_precision) {
  Compute c;
  c.device = torch::Device(o.device);
  c.precision = o.precision.empty() ? default_precision : o.precision;
  if (c.device.is_cuda() && !torch::cuda::is_available())
    throw std::runtime_error("--device cuda: no CUDA device is available to this build");
  if (c.precision == "fp16" && !c.device.is_cuda()) throw CLI::ValidationError("--precision", "fp16 needs --device cuda");
  c.dtype = c.precision == "bf16" ? torch::kBFloat16 : c.precision == "fp16" ? torch::kHalf : torch::kFloat;
  return c;
}

}  // namespace tessera::apps
