// Model throughput on the GPU with Tessera's attention vs LibTorch's
// at::scaled_dot_product_attention, same weights, same program, bf16:
// ViT-B/16 and ViT-L/16 tiles/s (batch 256), Swin UNETR feature size 48 on
// 96³ (batch 4), VideoMAE-B clips/s (16×224², batch 8). Random weights:
// throughput does not depend on them; the two backends' outputs are compared
// as a sanity check. Prints a markdown table.
//   bench_models [--iters N]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tessera/models/swin_unetr.h"
#include "tessera/models/transformer_layers.h"
#include "tessera/models/videomae.h"
#include "tessera/models/vit.h"

namespace {

using namespace tessera::models;

void to_bf16_cuda(torch::nn::Module& m) {
  m.to(torch::kCUDA);
  torch::NoGradGuard ng;
  for (auto& p : m.parameters()) p.set_data(p.to(torch::kBFloat16));
  for (auto& b : m.buffers())
    if (b.is_floating_point()) b.set_data(b.to(torch::kBFloat16));
}

double median_ms(int iters, const std::function<torch::Tensor()>& f, torch::Tensor* last) {
  std::vector<double> t;
  for (int i = 0; i < iters + 2; ++i) {
    torch::cuda::synchronize();
    const auto a = std::chrono::steady_clock::now();
    *last = f();
    torch::cuda::synchronize();
    if (i >= 2) t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Case {
  std::string name, unit;
  int64_t items;
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor()> run;
};

}  // namespace

int main(int argc, char** argv) {
  int iters = 5;
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--iters")) iters = std::atoi(argv[i + 1]);
  if (!torch::cuda::is_available() || !torch_sdpa_available()) {
    std::printf("bench_models needs a CUDA device and LibTorch >= 2.0 (for the SDPA comparison)\n");
    return 0;
  }
  torch::manual_seed(0);
  torch::NoGradGuard ng;
  std::vector<Case> cases;
  auto vit = [&](const char* name, int64_t dim, int64_t depth, int64_t heads) {
    ViTConfig c;
    c.embed_dim = dim;
    c.depth = depth;
    c.num_heads = heads;
    auto m = std::make_shared<VisionTransformerImpl>(c);
    m->eval();
    to_bf16_cuda(*m);
    auto x = torch::randn({256, 3, 224, 224}, torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16));
    cases.push_back({name, "tiles/s", 256, m, [m, x] { return m->forward_features(x); }});
  };
  vit("ViT-B/16, batch 256", 768, 12, 12);
  vit("ViT-L/16, batch 256", 1024, 24, 16);
  {
    SwinUNETRConfig c;
    c.in_channels = 1;
    c.out_channels = 14;
    c.feature_size = 48;
    auto m = std::make_shared<SwinUNETRImpl>(c);
    m->eval();
    to_bf16_cuda(*m);
    auto x = torch::randn({4, 1, 96, 96, 96}, torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16));
    cases.push_back({"Swin UNETR fs48, 4 x 96^3", "volumes/s", 4, m, [m, x] { return m->forward(x); }});
  }
  {
    VideoMAEConfig c;  // VideoMAE-B defaults: 768 wide, 12 layers, 12 heads
    auto m = std::make_shared<VideoMAEModelImpl>(c);
    m->eval();
    to_bf16_cuda(*m);
    auto x = torch::randn({8, 16, 3, 224, 224}, torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16));
    cases.push_back({"VideoMAE-B, 8 clips 16x224^2", "clips/s", 8, m, [m, x] { return m->forward(x); }});
  }
  std::printf("| model | Tessera ms | Tessera %s | SDPA ms | SDPA | SDPA/Tessera time | outputs rel diff |\n", "items/s");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (auto& c : cases) {
    torch::Tensor a, b;
    set_attention_backend(AttentionBackend::tessera);
    const double ta = median_ms(iters, c.run, &a);
    set_attention_backend(AttentionBackend::torch_sdpa);
    const double tb = median_ms(iters, c.run, &b);
    set_attention_backend(AttentionBackend::tessera);
    const double diff = ((a.to(torch::kFloat) - b.to(torch::kFloat)).norm() / b.to(torch::kFloat).norm()).item<double>();
    std::printf("| %s | %.1f | %.0f %s | %.1f | %.0f %s | %.2fx | %.1e |\n", c.name.c_str(), ta, c.items * 1000.0 / ta,
                c.unit.c_str(), tb, c.items * 1000.0 / tb, c.unit.c_str(), tb / ta, diff);
    std::fflush(stdout);
  }
  return 0;
}
