// Model throughput on the GPU with Tessera's attention vs LibTorch's
// at::scaled_dot_product_attention, same weights, same program, bf16:
// ViT-B/16 and ViT-L/16 tiles/s (batch 256), Swin UNETR feature size 48 on
// 96³ (batch 4), VideoMAE-B clips/s (16×224², batch 8). Random weights:
// throughput does not depend on them; the two backends' outputs are compared
// as a sanity check. The backends run in alternation (medians of 10 runs
// each), so drift over the run falls on both. Prints a markdown table. The
// cases live in tessera_bench, shared with `tessera bench`.
//   bench_models [--iters N] [--only SUBSTRING] [--profile N] [--cudnn-benchmark on|off|LIMIT]
//   (--only ViT: the cases whose name holds it; --profile N: then, per case, the kernels of N Tessera runs
//   by GPU time, from LibTorch's profiler; --cudnn-benchmark: cuDNN's timed algorithm search instead of its
//   heuristics (off, LibTorch's default), LIMIT: trying at most LIMIT algorithms per convolution; the first
//   call's time has its own column: what the search costs)
#include <ATen/Context.h>
#include <torch/cuda.h>

#include <chrono>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tessera/bench/kernel_profile.h"
#include "tessera/bench/model_cases.h"
#include "tessera/models/transformer_layers.h"

int main(int argc, char** argv) {
  namespace tb = tessera::bench;
  tb::TimingOptions timing{10, 2, c10::Device(c10::kCUDA)};
  std::string only;
  int profile = 0;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--iters")) timing.reps = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];
    if (!std::strcmp(argv[i], "--profile")) profile = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--cudnn-benchmark")) {
      const int limit = std::atoi(argv[i + 1]);  // a number: the search tries at most that many algorithms
      at::globalContext().setBenchmarkCuDNN(limit > 0 || !std::strcmp(argv[i + 1], "on"));
      if (limit > 0) at::globalContext().setBenchmarkLimitCuDNN(limit);
    }
  }
  const bool search = at::globalContext().benchmarkCuDNN();
  if (!torch::cuda::is_available() || !tessera::models::torch_sdpa_available()) {
    std::printf("bench_models needs a CUDA device and LibTorch >= 2.0 (for the SDPA comparison)\n");
    return 0;
  }
  const auto cases = tb::make_model_cases(timing.device, c10::kBFloat16, /*quick=*/false);
  if (search) std::printf("cuDNN algorithms: timed search (benchmark mode), at most %d per convolution\n\n", at::globalContext().benchmarkLimitCuDNN());
  else std::printf("cuDNN algorithms: heuristics\n\n");
  std::printf("| model | first call ms | Tessera ms | Tessera %s | SDPA ms | SDPA | SDPA/Tessera time | outputs rel diff |\n", "items/s");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const auto& c : cases) {
    if (c.name.find(only) == std::string::npos) continue;
    // The first call of a shape: kernels loaded, cuDNN plans built (and, in benchmark mode, searched).
    tessera::models::set_attention_backend(tessera::models::AttentionBackend::tessera);
    torch::cuda::synchronize();
    const auto f0 = std::chrono::steady_clock::now();
    {
      torch::NoGradGuard no_grad;
      c.run();
    }
    torch::cuda::synchronize();
    const double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - f0).count();
    const auto t = tb::time_model(c, timing);
    const double ta = t.tessera_ms, ts = t.sdpa_ms.value_or(0);  // SDPA is there: checked above
    std::printf("| %s | %.0f | %.1f | %.0f %s | %.1f | %.0f %s | %.2fx | %.1e |\n", c.name.c_str(), first_ms, ta,
                c.items * 1000.0 / ta, c.unit.c_str(), ts, c.items * 1000.0 / ts, c.unit.c_str(), ts / ta, t.rel_diff.value_or(0));
    std::fflush(stdout);
  }
  for (const auto& c : cases) {
    if (profile <= 0 || c.name.find(only) == std::string::npos) continue;
    std::printf("\n### %s, Tessera attention\n", c.name.c_str());
    torch::NoGradGuard no_grad;
    tessera::models::set_attention_backend(tessera::models::AttentionBackend::tessera);
    tb::print_kernel_profile([&] { c.run(); }, profile, timing.device);
  }
  return 0;
}
