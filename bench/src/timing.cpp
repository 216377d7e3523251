#include "tessera/bench/timing.h"

#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

namespace tessera::bench {

void synchronize(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.has_index() ? device.index() : -1);
}

double median_ms(const TimingOptions& o, const std::function<void()>& timed, const std::function<void()>& untimed) {
  if (o.reps < 1) throw std::invalid_argument("median_ms: reps must be at least 1");
  std::vector<double> t;
  for (int i = 0; i < o.warmup + o.reps; ++i) {
    if (untimed) untimed();
    synchronize(o.device);
    const auto a = std::chrono::steady_clock::now();
    timed();
    synchronize(o.device);
    if (i >= o.warmup) t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace tessera::bench
