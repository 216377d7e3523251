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

namespace {

// Milliseconds of one f(), the device synchronised on both sides.
double wall_ms(const c10::Device& device, const std::function<void()>& f) {
  synchronize(device);
  const auto t0 = std::chrono::steady_clock::now();
  f();
  synchronize(device);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

double median_ms(const TimingOptions& o, const std::function<void()>& timed, const std::function<void()>& untimed) {
  if (o.reps < 1) throw std::invalid_argument("median_ms: reps must be at least 1");
  std::vector<double> t;
  for (int i = 0; i < o.warmup + o.reps; ++i) {
    if (untimed) untimed();
    const double ms = wall_ms(o.device, timed);
    if (i >= o.warmup) t.push_back(ms);
  }
  return median(std::move(t));
}

std::pair<double, double> paired_median_ms(const TimingOptions& o, const std::function<void()>& a,
                                           const std::function<void()>& b) {
  if (o.reps < 1) throw std::invalid_argument("paired_median_ms: reps must be at least 1");
  std::vector<double> ta, tb;
  for (int i = 0; i < o.warmup + o.reps; ++i) {
    const bool a_first = i % 2 == 0;
    const double first = wall_ms(o.device, a_first ? a : b), second = wall_ms(o.device, a_first ? b : a);
    if (i < o.warmup) continue;
    ta.push_back(a_first ? first : second);
    tb.push_back(a_first ? second : first);
  }
  return {median(std::move(ta)), median(std::move(tb))};
}

}  // namespace tessera::bench
