#include "run_stats.h"

#include "tessera/torch/cuda_memory.h"

namespace tessera::apps {
namespace {
int index_of(const torch::Device& d) { return d.has_index() ? d.index() : 0; }
double unix_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}
}  // namespace

RunStats::RunStats(const torch::Device& device, std::string precision)
    : device_(device),
      precision_(std::move(precision)),
      start_(std::chrono::steady_clock::now()),
      start_wall_(std::chrono::system_clock::now()) {
  if (device_.is_cuda() && torch_ops::cuda_memory_stats_available()) torch_ops::reset_peak_cuda_memory(index_of(device_));
}

nlohmann::json RunStats::json(const std::string& unit, double amount) const {
  // Queued GPU work belongs to this run: wait for it before reading the clock.
  if (device_.is_cuda()) torch::cuda::synchronize(index_of(device_));
  const double s = seconds_since(start_);
  nlohmann::json j = {{"device", device_.str()}, {"precision", precision_}, {"seconds", s}, {unit, amount},
                      {unit + "_per_s", s > 0 ? amount / s : 0.0}, {"peak_gpu_bytes", nullptr}};
  const int64_t peak = device_.is_cuda() ? torch_ops::peak_cuda_memory_bytes(index_of(device_)) : -1;
  if (peak >= 0) j["peak_gpu_bytes"] = peak;
  j["started_unix"] = unix_seconds(start_wall_);
  j["ended_unix"] = unix_seconds(std::chrono::system_clock::now());
  return j;
}

}  // namespace tessera::apps
