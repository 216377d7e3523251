// What one run of a pipeline command cost, for its --json summary (the
// "run" object): seconds inside the command (model loading, CUDA start-up
// and output writing included; process start-up not), throughput in the
// command's own unit, and peak GPU memory as LibTorch's caching allocator
// counts it (null on the CPU or without a CUDA LibTorch).
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

namespace tessera::apps {

// Seconds from `t` until now: the stages a command times for its --json summary.
inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

class RunStats {
 public:
  // Starts the clock; on a CUDA device also restarts the allocator's peak count.
  RunStats(const torch::Device& device, std::string precision);
  // {"device", "precision", "seconds", "<unit>": amount, "<unit>_per_s", "peak_gpu_bytes", "started_unix",
  // "ended_unix"}: the last two the command's start and end in seconds since the epoch, so that a caller timing
  // the process splits what lies outside the command into start-up and exit.
  nlohmann::json json(const std::string& unit, double amount) const;

 private:
  torch::Device device_;
  std::string precision_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::system_clock::time_point start_wall_;
};

}  // namespace tessera::apps
