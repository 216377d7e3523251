#include "compute_options.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <stdexcept>

namespace tessera::apps {

void add_compute_options(CLI::App* cmd, ComputeOptions& o, const char* precision_help) {
  cmd->add_option("--device", o.device, "cpu, cuda or cuda:N (the CUDA device of index N)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& s) { return parse_device(s) ? std::string() : "expected cpu, cuda or cuda:N, got '" + s + "'"; },
          "DEVICE"));
  if (precision_help)
    cmd->add_option("--precision", o.precision, precision_help)->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
}

std::optional<torch::Device> parse_device(const std::string& s) {
  if (s == "cpu") return torch::Device(torch::kCPU);
  if (s == "cuda") return torch::Device(torch::kCUDA);
  const std::string prefix = "cuda:", n = s.substr(std::min(s.size(), prefix.size()));
  if (s.rfind(prefix, 0) != 0 || n.empty() || n.size() > 3 || n.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  const int index = std::stoi(n);
  if (index > 127) return std::nullopt;  // c10::DeviceIndex is 8 bits
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

torch::Device checked_device(const std::string& s, const std::string& option) {
  const auto d = parse_device(s);
  if (!d) throw CLI::ValidationError(option, "expected cpu, cuda or cuda:N, got '" + s + "'");
  if (!d->is_cuda()) return *d;
  const size_t count = torch::cuda::is_available() ? torch::cuda::device_count() : 0;
  if (count == 0) throw std::runtime_error(option + " " + s + ": no CUDA device is available to this build");
  if (d->has_index() && size_t(d->index()) >= count)
    throw std::runtime_error(option + " " + s + ": no such CUDA device (this machine has " + std::to_string(count) +
                             ", cuda:0 to cuda:" + std::to_string(count - 1) + ")");
  return *d;
}

Compute resolve_compute(const ComputeOptions& o, const std::string& default_precision) {
  Compute c;
  c.device = checked_device(o.device, "--device");
  c.precision = o.precision.empty() ? default_precision : o.precision;
  if (c.precision == "fp16" && !c.device.is_cuda()) throw CLI::ValidationError("--precision", "fp16 needs --device cuda");
  c.dtype = c.precision == "bf16" ? torch::kBFloat16 : c.precision == "fp16" ? torch::kHalf : torch::kFloat;
  // Work on cuda:N that names no device (cuBLAS handles, synchronize(), a fresh context) would otherwise land on cuda:0.
  if (c.device.is_cuda() && c.device.has_index())
    c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->setDevice(c.device);
  return c;
}

}  // namespace tessera::apps
