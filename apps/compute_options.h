// --device and --precision of the commands that run models (segment, embed-wsi, video, train,
// bench): declared, defaulted and checked in one place.
#pragma once

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <string>

namespace tessera::apps {

struct ComputeOptions {
  std::string device = "cpu";
  std::string precision;  // empty: the command's default (resolve_compute)
};

// Adds --device, and --precision when precision_help is given.
void add_compute_options(CLI::App* cmd, ComputeOptions& o, const char* precision_help = nullptr);

struct Compute {
  torch::Device device = torch::kCPU;
  std::string precision;
  torch::ScalarType dtype = torch::kFloat;
};

// The options resolved once: default_precision where none was given; fails with one line when
// --device cuda finds no device, or fp16 is asked of the CPU.
Compute resolve_compute(const ComputeOptions& o, const std::string& default_precision);

}  // namespace tessera::apps
