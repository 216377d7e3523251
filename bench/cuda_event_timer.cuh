// Median device time of one call, for the CUDA benchmark programs: the calls
// are queued back to back with an event pair around each and one
// synchronisation at the end (as triton.testing.do_bench), so host launch
// latency stays out of short kernels' times. Two untimed calls warm up.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace tessera::bench {

inline void timer_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "timing: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

template <typename F>
float median_device_ms(F&& f, int reps) {
  f();
  f();
  timer_check(cudaDeviceSynchronize(), "warm-up");
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto& e : ev) timer_check(cudaEventCreate(&e), "event create");
  for (int r = 0; r < reps; ++r) {
    timer_check(cudaEventRecord(ev[2 * r]), "event record");
    f();
    timer_check(cudaEventRecord(ev[2 * r + 1]), "event record");
  }
  timer_check(cudaDeviceSynchronize(), "timed calls");
  std::vector<float> t(reps);
  for (int r = 0; r < reps; ++r) timer_check(cudaEventElapsedTime(&t[r], ev[2 * r], ev[2 * r + 1]), "elapsed");
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace tessera::bench
