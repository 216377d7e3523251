// Wall-clock timing shared by the benchmark programs and `tessera bench`:
// medians of repeated runs, with the device synchronised on both sides of each
// run so that CUDA work is timed to its end rather than to its launch.
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <utility>

namespace tessera::bench {

// Waits for the device's queued work (CUDA); nothing to wait for on the CPU.
void synchronize(const c10::Device& device);

struct TimingOptions {
  int reps = 5;    // timed runs; the median is reported
  int warmup = 1;  // untimed runs first (allocator, cuDNN/BLAS plans, caches)
  c10::Device device{c10::kCPU};
};

// Median milliseconds of `timed()`. `untimed()`, when given, runs before each
// call outside the clock (e.g. the forward that builds the graph a timed
// backward consumes).
double median_ms(const TimingOptions& o, const std::function<void()>& timed,
                 const std::function<void()>& untimed = {});

// Medians of `a()` and `b()` timed in alternation (a b, b a, a b, ..., warm-up
// rounds first), so that clock ramps, thermal drift and allocator growth over
// the run fall on both sides alike rather than on whichever ran second.
std::pair<double, double> paired_median_ms(const TimingOptions& o, const std::function<void()>& a,
                                           const std::function<void()>& b);

}  // namespace tessera::bench
