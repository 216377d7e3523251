#include "tessera/bench/model_cases.h"

#include <torch/torch.h>

#include <tuple>

#include "tessera/models/swin_unetr.h"
#include "tessera/models/transformer_layers.h"
#include "tessera/models/videomae.h"
#include "tessera/models/vit.h"

namespace tessera::bench {

using namespace tessera::models;

void cast_module(torch::nn::Module& m, const c10::Device& device, c10::ScalarType dtype) {
  m.to(device);
  torch::NoGradGuard no_grad;
  for (auto& p : m.parameters()) p.set_data(p.to(dtype));
  for (auto& b : m.buffers())
    if (b.is_floating_point()) b.set_data(b.to(dtype));
}

namespace {

// Restores Tessera's attention however the timing ends.
struct BackendGuard {
  ~BackendGuard() { set_attention_backend(AttentionBackend::tessera); }
};

template <typename M>
std::shared_ptr<M> ready(std::shared_ptr<M> m, const c10::Device& device, c10::ScalarType dtype) {
  m->eval();
  cast_module(*m, device, dtype);
  return m;
}

}  // namespace

std::vector<ModelCase> make_model_cases(const c10::Device& device, c10::ScalarType dtype, bool quick) {
  torch::manual_seed(0);
  const bool gpu = device.is_cuda();
  const auto opts = torch::TensorOptions().device(device).dtype(dtype);
  std::vector<ModelCase> cases;
  auto vit = [&](const char* label, int64_t dim, int64_t depth, int64_t heads, int64_t batch) {
    ViTConfig c;
    c.embed_dim = dim;
    c.depth = depth;
    c.num_heads = heads;
    auto m = ready(std::make_shared<VisionTransformerImpl>(c), device, dtype);
    auto x = torch::randn({batch, 3, 224, 224}, opts);
    cases.push_back({std::string(label) + ", batch " + std::to_string(batch), "tiles/s", batch,
                     [m, x] { return m->forward_features(x); }});
  };
  // UNI2-h's architecture (configs/uni2_h.yaml): ViT-H/14, 8 registers, packed SwiGLU, LayerScale.
  auto uni2_h = [&](int64_t batch) {
    ViTConfig c;
    c.patch_size = 14;
    c.embed_dim = 1536;
    c.depth = 24;
    c.num_heads = 24;
    c.mlp_ratio = 5.33334;
    c.mlp_layer = "swiglu_packed";
    c.act_layer = "silu";
    c.init_values = 1e-5;
    c.reg_tokens = 8;
    c.no_embed_class = true;
    c.dynamic_img_size = true;
    auto m = ready(std::make_shared<VisionTransformerImpl>(c), device, dtype);
    auto x = torch::randn({batch, 3, 224, 224}, opts);
    cases.push_back({"UNI2-h (ViT-H/14 reg8 SwiGLU), batch " + std::to_string(batch), "tiles/s", batch,
                     [m, x] { return m->forward_features(x); }});
  };
  auto swin = [&](int64_t feature_size, int64_t batch, int64_t side) {
    SwinUNETRConfig c;
    c.in_channels = 1;
    c.out_channels = 14;
    c.feature_size = feature_size;
    auto m = ready(std::make_shared<SwinUNETRImpl>(c), device, dtype);
    auto x = torch::randn({batch, 1, side, side, side}, opts);
    const std::string s = std::to_string(side);
    cases.push_back({"Swin UNETR fs" + std::to_string(feature_size) + ", " + std::to_string(batch) + " x " + s + "^3",
                     "volumes/s", batch, [m, x] { return m->forward(x); }});
  };
  auto videomae = [&](const char* label, int64_t hidden, int64_t layers, int64_t heads, int64_t clips) {
    VideoMAEConfig c;
    c.hidden_size = hidden;
    c.num_hidden_layers = layers;
    c.num_attention_heads = heads;
    c.intermediate_size = 4 * hidden;
    auto m = ready(std::make_shared<VideoMAEModelImpl>(c), device, dtype);
    auto x = torch::randn({clips, 16, 3, 224, 224}, opts);
    cases.push_back({std::string(label) + ", " + std::to_string(clips) + (clips == 1 ? " clip" : " clips") + " 16x224^2",
                     "clips/s", clips,
                     [m, x] { return m->forward(x); }});
  };
  if (gpu && !quick) {
    vit("ViT-B/16", 768, 12, 12, 256);
    vit("ViT-L/16", 1024, 24, 16, 256);
    uni2_h(256);
    swin(48, 4, 96);
    videomae("VideoMAE-B", 768, 12, 12, 8);
  } else if (gpu) {
    vit("ViT-B/16", 768, 12, 12, 64);
    swin(48, 1, 96);
    videomae("VideoMAE-B", 768, 12, 12, 2);
  } else if (!quick) {
    vit("ViT-B/16", 768, 12, 12, 2);
    swin(24, 1, 64);
    videomae("VideoMAE-S", 384, 12, 6, 1);
  } else {  // seconds on two cores: `tessera bench --quick` runs in the CLI tests
    vit("ViT-S/16", 384, 12, 6, 1);
    swin(12, 1, 64);
    videomae("VideoMAE tiny", 192, 4, 3, 1);
  }
  return cases;
}

ModelTiming time_model(const ModelCase& c, const TimingOptions& timing) {
  torch::NoGradGuard no_grad;
  BackendGuard restore;
  ModelTiming t;
  torch::Tensor a, b;
  auto run_tessera = [&] { set_attention_backend(AttentionBackend::tessera); a = c.run(); };
  if (!torch_sdpa_available()) {
    t.tessera_ms = median_ms(timing, run_tessera);
    return t;
  }
  auto run_sdpa = [&] { set_attention_backend(AttentionBackend::torch_sdpa); b = c.run(); };
  std::tie(t.tessera_ms, t.sdpa_ms) = paired_median_ms(timing, run_tessera, run_sdpa);
  const auto af = a.to(torch::kFloat), bf = b.to(torch::kFloat);
  t.rel_diff = ((af - bf).norm() / bf.norm()).item<double>();
  return t;
}

}  // namespace tessera::bench
