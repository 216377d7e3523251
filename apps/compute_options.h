// --device and --precision of the commands that run models (segment, embed-wsi, video, train,
// bench): declared, defaulted and checked in one place.
#pragma once

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <optional>
#include <string>

namespace tessera::apps {

struct ComputeOptions {
  std::string device = "cpu";
  std::string precision;  // empty: the command's default (resolve_compute)
};

// Adds --device, and --precision when precision_help is given.
void add_compute_options(CLI::App* cmd, ComputeOptions& o, const char* precision_help = nullptr);

// "cpu", "cuda" or "cuda:N" (N a decimal index below 128); nullopt for anything else ("gpu", "cuda:x", "cuda:-1").
std::optional<torch::Device> parse_device(const std::string& s);

// A device this process can run on: parsed, and for CUDA a device must exist and N must be below
// torch::cuda::device_count(). Throws one line naming `option` otherwise (bad syntax as CLI::ValidationError).
torch::Device checked_device(const std::string& s, const std::string& option);

struct Compute {
  torch::Device device = torch::kCPU;
  std::string precision;
  torch::ScalarType dtype = torch::kFloat;
};

// The options resolved once: default_precision where none was given; fails with one line naming
// --device when the device is not one checked_device accepts, or fp16 is asked of the CPU. A
// CUDA device becomes the process's current one.
Compute resolve_compute(const ComputeOptions& o, const std::string& default_precision);

}  // namespace tessera::apps
