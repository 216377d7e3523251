#include "tessera/bench/kernel_profile.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tessera/bench/timing.h"

namespace tessera::bench {

void print_kernel_profile(const std::function<void()>& fn, int reps, const c10::Device& device, int top) {
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
  const std::set<ActivityType> activities{ActivityType::CPU, ActivityType::CUDA};
  fn();  // plans and caches outside the profile
  synchronize(device);
  prof::prepareProfiler(config, activities);
  prof::enableProfiler(config, activities);
  for (int i = 0; i < reps; ++i) fn();
  synchronize(device);
  const auto result = prof::disableProfiler();

  struct Sum {
    double us = 0;
    int calls = 0;
  };
  std::map<std::string, Sum> by_name;
  double total_us = 0;
  for (const auto& e : result->events()) {
    if (e.deviceType() != c10::DeviceType::CUDA) continue;
#if TORCH_VERSION_MAJOR >= 2
    const double us = static_cast<double>(e.durationNs()) / 1e3;
#else
    const double us = static_cast<double>(e.durationUs());
#endif
    Sum& s = by_name[e.name()];
    s.us += us;
    ++s.calls;
    total_us += us;
  }
  std::vector<std::pair<std::string, Sum>> rows(by_name.begin(), by_name.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
  std::printf("\nGPU time per run: %.2f ms over %zu distinct kernels\n\n", total_us / 1e3 / reps, rows.size());
  std::printf("| kernel | calls per run | ms per run | share |\n|---|---|---|---|\n");
  for (size_t i = 0; i < rows.size() && i < static_cast<size_t>(top); ++i) {
    const auto& [name, s] = rows[i];
    std::printf("| %.110s | %.1f | %.3f | %.1f %% |\n", name.c_str(), double(s.calls) / reps, s.us / 1e3 / reps,
                100.0 * s.us / std::max(total_us, 1e-9));
  }
  std::fflush(stdout);
}

}  // namespace tessera::bench
