// Training-step time and peak GPU memory with Tessera's attention vs
// LibTorch's at::scaled_dot_product_attention, same weights, same program,
// bf16 on CUDA. One step = forward + loss + backward + torch::optim::AdamW step.
//   swin     Swin UNETR fs48, batch 2 × 1 × 96³ → 14 classes, cross-entropy on random labels
//   vit16k   ViT-B blocks (12 layers, 768 wide, 12 heads) over 16,384 tokens, batch 1
//   vit64k   the same over 65,536 tokens (a slide's worth of tiles)
// The ViT cases feed random tokens straight into the blocks (no patch
// embedding: at these lengths attention and the MLPs are the whole cost) and
// regress them onto a random target (MSE). Losses are computed in fp32.
// Parameters are bf16 too, AdamW updating bf16 weights: fine for timing a
// step, not how a model would be trained for real (fp32 master weights).
// Peak memory is the caching allocator's peak of allocated bytes (weights,
// gradients, optimizer state, activations), reset before each model is built.
// Random weights: speed does not depend on them. Prints a markdown table.
//   bench_train [--iters N] [--cases swin,vit16k,vit64k]
// (median of N = 3 steps after 2 untimed ones, which allocate AdamW's state)
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessera/bench/model_cases.h"
#include "tessera/bench/timing.h"
#include "tessera/torch/cuda_memory.h"
#include "tessera/models/swin_unetr.h"
#include "tessera/models/transformer_layers.h"
#include "tessera/models/vit.h"

namespace {

namespace tb = tessera::bench;
namespace models = tessera::models;
namespace torch_ops = tessera::torch_ops;

// ViT-B's transformer blocks and final norm over a token sequence [B, N, 768].
struct TokenViTImpl : torch::nn::Module {
  explicit TokenViTImpl(const models::ViTConfig& c) {
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.depth; ++i) blocks->push_back(models::ViTBlock(c));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.embed_dim}).eps(c.norm_eps)));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& b : *blocks) x = b->as<models::ViTBlock>()->forward(x);
    return norm(x);
  }
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm norm{nullptr};
};

// A model ready to train and the loss of one step on fixed inputs.
struct Trainable {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor()> loss;
};

struct TrainCase {
  std::string key, name;
  std::function<Trainable(const torch::TensorOptions&)> make;
};

std::vector<TrainCase> all_cases() {
  std::vector<TrainCase> cases;
  cases.push_back({"swin", "Swin UNETR fs48, 2 x 96^3, 14 classes", [](const torch::TensorOptions& o) {
                     models::SwinUNETRConfig c;
                     c.in_channels = 1;
                     c.out_channels = 14;
                     c.feature_size = 48;
                     auto m = std::make_shared<models::SwinUNETRImpl>(c);
                     tb::cast_module(*m, o.device(), o.dtype().toScalarType());
                     auto x = torch::randn({2, 1, 96, 96, 96}, o);
                     auto labels = torch::randint(0, 14, {2, 96, 96, 96}, o.dtype(torch::kLong));
                     return Trainable{m, [m, x, labels] {
                                        return torch::nn::functional::cross_entropy(m->forward(x).to(torch::kFloat),
                                                                                    labels);
                                      }};
                   }});
  for (const int64_t n : {16384, 65536}) {
    const std::string k = std::to_string(n / 1024) + "k";
    cases.push_back({"vit" + k, "ViT-B blocks, 1 x " + k + " tokens", [n](const torch::TensorOptions& o) {
                       models::ViTConfig c;  // ViT-B: 768 wide, 12 layers, 12 heads
                       auto m = std::make_shared<TokenViTImpl>(c);
                       tb::cast_module(*m, o.device(), o.dtype().toScalarType());
                       auto x = torch::randn({1, n, c.embed_dim}, o), target = torch::randn({1, n, c.embed_dim}, o);
                       return Trainable{m, [m, x, target] {
                                          return torch::mse_loss(m->forward(x).to(torch::kFloat), target.to(torch::kFloat));
                                        }};
                     }});
  }
  return cases;
}

struct StepResult {
  double ms = 0;
  double peak_gib = -1;    // < 0: not measured
  double first_loss = 0;   // the same weights and inputs give the same loss either way: a sanity check
  std::string error;     // e.g. out of memory; the other backend still runs
};

// Builds the case afresh (same seed, so the same weights for both backends) and times training steps.
StepResult time_steps(const TrainCase& c, models::AttentionBackend backend, const tb::TimingOptions& timing) {
  StepResult r;
  try {
    torch_ops::reset_peak_cuda_memory();
    models::set_attention_backend(backend);
    torch::manual_seed(0);
    auto t = c.make(torch::TensorOptions().device(timing.device).dtype(torch::kBFloat16));
    t.module->train();
    torch::optim::AdamW opt(t.module->parameters(), torch::optim::AdamWOptions(1e-4));
    bool first = true;
    r.ms = tb::median_ms(timing, [&] {
      opt.zero_grad();
      auto loss = t.loss();
      if (first) r.first_loss = loss.item<double>();  // a warm-up step: its sync is not timed
      first = false;
      loss.backward();
      opt.step();
    });
    const int64_t peak = torch_ops::peak_cuda_memory_bytes();
    if (peak >= 0) r.peak_gib = double(peak) / double(1LL << 30);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    r.error = what.substr(0, what.find('\n'));
  }
  models::set_attention_backend(models::AttentionBackend::tessera);
  return r;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// The "ms/step | peak GiB" cells of one backend.
std::string cells(const StepResult& r) {
  if (!r.error.empty()) return "failed: " + r.error.substr(0, 80) + " | ";
  return fmt("%.1f", r.ms) + " | " + (r.peak_gib >= 0 ? fmt("%.2f", r.peak_gib) : "n/a");
}

// The comparison cells: time ratio, memory ratio, first-loss agreement (empty where a side failed).
std::string compare(const StepResult& a, const StepResult& b) {
  if (!a.error.empty() || !b.error.empty()) return " | | ";
  const std::string mem = a.peak_gib > 0 && b.peak_gib >= 0 ? fmt("%.2fx", b.peak_gib / a.peak_gib) : "";
  return fmt("%.2fx", b.ms / a.ms) + " | " + mem + " | " +
         fmt("%.1e", std::abs(a.first_loss - b.first_loss) / std::abs(b.first_loss));
}

}  // namespace

int main(int argc, char** argv) {
  tb::TimingOptions timing{3, 2, c10::Device(c10::kCUDA)};  // steps take up to seconds at 64k tokens
  std::string only;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--iters")) timing.reps = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--cases")) only = "," + std::string(argv[i + 1]) + ",";
  }
  if (!torch::cuda::is_available()) {
    std::printf("bench_train needs a CUDA device (bf16 training steps); none here, nothing run\n");
    return 0;
  }
  const bool sdpa = models::torch_sdpa_available();
  std::printf("| case | Tessera ms/step | Tessera peak GiB | SDPA ms/step | SDPA peak GiB | SDPA/Tessera time | "
              "SDPA/Tessera memory | first loss rel diff |\n|---|---|---|---|---|---|---|---|\n");
  for (const auto& c : all_cases()) {
    if (!only.empty() && only.find("," + c.key + ",") == std::string::npos) continue;
    const StepResult a = time_steps(c, models::AttentionBackend::tessera, timing);
    std::optional<StepResult> b;
    if (sdpa) b = time_steps(c, models::AttentionBackend::torch_sdpa, timing);
    const std::string rest = b ? cells(*b) + " | " + compare(a, *b) : "LibTorch < 2.0: no SDPA | | | | ";
    const std::string row = "| " + c.name + " | " + cells(a) + " | " + rest + " |";
    std::printf("%s\n", row.c_str());
    std::fflush(stdout);
  }
  if (!torch_ops::cuda_memory_stats_available())
    std::printf("\n(peak memory needs a CUDA build of LibTorch: this one has no c10_cuda)\n");
  return 0;
}
