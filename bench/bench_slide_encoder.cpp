// Prov-GigaPath's slide encoder (the published 12-layer, 768-d LongNetViT,
// random weights) over one slide of N tiles on the GPU: forward time and peak
// memory at each N, forward + backward at the sizes asked, and beside them the
// dense aggregator of the same width, depth and heads (all-pairs attention with
// 2-D RoPE) at the sizes asked. Tiles sit on a square lattice of 256-px cells in
// random order (the encoder's sequence order is the given order). Prints one
// markdown table; the published implementation's time comes from
// bench/longnet_reference.py on the same shapes.
//   bench_slide_encoder [--tiles 100000,1000000] [--backward 100000] [--dense 100000] [--reps 3]
//                       [--precision bf16|fp16|fp32]
#include <CLI/CLI.hpp>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "tessera/bench/model_cases.h"
#include "tessera/bench/timing.h"
#include "tessera/models/aggregator.h"
#include "tessera/models/longnet.h"
#include "tessera/torch/cuda_memory.h"

namespace {

namespace tb = tessera::bench;
namespace tm = tessera::models;

// N tiles at distinct cells of the smallest square lattice that holds them, level-0 pixels, shuffled.
torch::Tensor lattice_coords(int64_t n, const torch::Device& device) {
  const auto side = static_cast<int64_t>(std::ceil(std::sqrt(double(n))));
  const auto cell = torch::randperm(side * side, torch::kLong).narrow(0, 0, n);
  return torch::stack({torch::remainder(cell, side), torch::div(cell, side, "floor")}, -1)
      .mul(256)
      .to(device, torch::kFloat)
      .unsqueeze(0);
}

struct Measured {
  double ms = 0, peak_gib = 0;
};

Measured measure(const tb::TimingOptions& timing, const std::function<void()>& run) {
  tessera::torch_ops::reset_peak_cuda_memory(timing.device.index());
  Measured m;
  m.ms = tb::median_ms(timing, run);
  m.peak_gib = double(tessera::torch_ops::peak_cuda_memory_bytes(timing.device.index())) / double(1 << 30);
  return m;
}

void row(const char* model, int64_t n, const char* pass, const Measured& m) {
  std::printf("| %s | %lld | %s | %.3f | %.1f |\n", model, static_cast<long long>(n), pass, m.ms / 1000.0, m.peak_gib);
  std::fflush(stdout);
}

bool contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"GigaPath's slide encoder over whole slides: time and peak memory"};
  std::vector<int64_t> tiles{100000, 1000000}, backward{100000}, dense{100000};
  int reps = 3;
  std::string precision = "bf16";
  app.add_option("--tiles", tiles, "slide lengths (tiles) of the forward rows")->delimiter(',');
  app.add_option("--backward", backward, "lengths that also get a forward + backward row")->delimiter(',');
  app.add_option("--dense", dense, "lengths that also get the dense aggregator's forward row")->delimiter(',');
  app.add_option("--reps", reps, "timed runs per row (the median is printed)")->check(CLI::PositiveNumber);
  app.add_option("--precision", precision, "weights and activations")->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
  CLI11_PARSE(app, argc, argv);
  if (!torch::cuda::is_available() || !tessera::torch_ops::cuda_memory_stats_available()) {
    std::printf("bench_slide_encoder needs a CUDA device (and LibTorch's CUDA allocator statistics)\n");
    return 0;
  }
  const auto dtype = precision == "bf16" ? torch::kBFloat16 : precision == "fp16" ? torch::kHalf : torch::kFloat;
  const tb::TimingOptions timing{reps, 1, c10::Device(c10::kCUDA, 0)};
  torch::manual_seed(0);

  tm::LongNetViTConfig lc;  // the defaults are gigapath_slide_enc12l768d's
  lc.norm_eps = 1e-6;
  tm::LongNetViT encoder(lc);
  tb::cast_module(*encoder, timing.device, dtype);
  tm::AggregatorConfig ac;
  ac.in_dim = lc.in_chans;
  ac.dim = lc.embed_dim;
  ac.depth = lc.depth;
  ac.num_heads = lc.num_heads;
  ac.mlp_ratio = lc.mlp_ratio;
  tm::LongSequenceAggregator aggregator(ac);
  tb::cast_module(*aggregator, timing.device, dtype);

  std::printf("| model | tiles | pass | seconds | peak GiB |\n|---|---|---|---|---|\n");
  std::vector<int64_t> all = tiles;
  for (auto n : backward) if (!contains(all, n)) all.push_back(n);
  for (auto n : dense) if (!contains(all, n)) all.push_back(n);
  for (const int64_t n : all) {
    const auto x = torch::randn({1, n, lc.in_chans}, torch::TensorOptions().device(timing.device).dtype(dtype));
    const auto coords = lattice_coords(n, timing.device);
    if (contains(tiles, n)) {
      encoder->eval();
      row("LongNetViT 12x768 (dilated)", n, "forward", measure(timing, [&] {
            torch::NoGradGuard ng;
            encoder->forward(x, coords);
          }));
    }
    if (contains(backward, n)) {
      encoder->train();
      row("LongNetViT 12x768 (dilated)", n, "forward + backward", measure(timing, [&] {
            encoder->zero_grad();
            encoder->forward(x, coords)[0].to(torch::kFloat).square().sum().backward();
          }));
    }
    if (contains(dense, n)) {
      aggregator->eval();
      const auto cells = coords.squeeze(0) / 256.0;
      row("dense aggregator 12x768 (RoPE)", n, "forward", measure(timing, [&] {
            torch::NoGradGuard ng;
            aggregator->forward(x.squeeze(0), cells);
          }));
    }
  }
  return 0;
}
