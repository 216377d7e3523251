// Counter-based weights, the C++ twin of scripts/fixtures/counter_weights.py:
// every tensor computed from its key name, bit-identical to the numpy
// generator, so the encoder fixtures need not store weights.
// Element i of `name`: splitmix64 at fnv1a64(name) + (i + 1) * golden gamma;
// its top 24 bits k give u = (k - 2^23) / 2^23; weight = float32(offset + scale * u).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tessera/models/safetensors.h"

namespace tessera::models::testing {

inline uint64_t fnv1a64(const std::string& name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char b : name) h = (h ^ b) * 0x100000001B3ull;
  return h;
}

// (offset, scale) by key name, as counter_weights.rule().
inline std::pair<double, double> counter_rule(const std::string& name) {
  std::vector<std::string> parts(1);
  for (char c : name) {
    if (c == '.') parts.emplace_back();
    else parts.back().push_back(c);
  }
  const std::string& last = parts.back();
  const std::string parent = parts.size() > 1 ? parts[parts.size() - 2] : "";
  if (last == "gamma" || last == "lambda1") return {0.5, 0.25};
  if (parent.find("norm") != std::string::npos) return last == "weight" ? std::pair{1.0, 0.125} : std::pair{0.0, 0.0625};
  if (last == "weight" || last == "bias") return {0.0, 1.0 / 32};
  return {0.0, 0.5};
}

inline torch::Tensor counter_tensor(const std::string& name, const std::vector<int64_t>& shape, double offset, double scale) {
  auto t = torch::empty(shape, torch::kFloat);
  float* p = t.data_ptr<float>();
  const uint64_t h = fnv1a64(name);
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    uint64_t z = h + static_cast<uint64_t>(i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const double u = (static_cast<double>(static_cast<int64_t>(z >> 40)) - 8388608.0) / 8388608.0;
    p[i] = static_cast<float>(offset + scale * u);
  }
  return t;
}

inline torch::Tensor counter_tensor(const std::string& name, const std::vector<int64_t>& shape) {
  const auto [offset, scale] = counter_rule(name);
  return counter_tensor(name, shape, offset, scale);
}

// A [1, C, size, size] input in [-2, 2), as counter_weights.image().
inline torch::Tensor counter_image(const std::string& name, int64_t size, int64_t channels = 3) {
  return counter_tensor(name, {1, channels, size, size}, 0.0, 2.0);
}

inline StateDict counter_state_dict(const std::vector<std::pair<std::string, std::vector<int64_t>>>& keys) {
  StateDict out;
  for (const auto& [k, shape] : keys) out.emplace(k, counter_tensor(k, shape));
  return out;
}

}  // namespace tessera::models::testing
