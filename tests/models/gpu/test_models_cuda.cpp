// The models on the GPU through the fused CUDA kernels, in bf16 (≤ 2e-2) and
// fp32 (≤ 1e-4, TF32 off) weights and activations, against the float64 fixtures: ViT-tiny (plain attention),
// ViT with register tokens and LayerScale, VideoMAE-tiny,
// Swin UNETR fs12 (head dim 4, zero-padded to the kernels' 8, with the
// relative-position bias and the shift mask as broadcast terms) and GigaPath's
// slide encoder (dilated attention, head dim 24). Label `gpu`;
// skipped without a CUDA device.
#include <gtest/gtest.h>
#include <ATen/Context.h>
#include <torch/torch.h>

#include "../../require_cuda.h"
#include "../fixtures.h"
#include "tessera/models/longnet.h"
#include "tessera/models/safetensors.h"
#include "tessera/models/state_dict.h"
#include "tessera/models/swin_unetr.h"
#include "tessera/models/videomae.h"
#include "tessera/models/vit.h"

namespace tessera::models {
namespace {

using namespace testing;

// Floating parameters and buffers to (cuda, dtype); integer buffers (index tables) only move.
void to_cuda(torch::nn::Module& m, torch::ScalarType dtype) {
  m.to(torch::kCUDA);
  torch::NoGradGuard ng;
  for (auto& p : m.parameters()) p.set_data(p.to(dtype));
  for (auto& b : m.buffers())
    if (b.is_floating_point()) b.set_data(b.to(dtype));
}

// A timm ViT fixture (vit_tiny_timm: plain blocks; vit_reg_timm: register tokens and LayerScale):
// forward_features and the pooled features.
void check_vit(const std::string& fixture_name, const ViTConfig& config, torch::ScalarType dtype, const char* name,
               double tol) {
  TESSERA_REQUIRE_FIXTURE(fixture_name + ".safetensors");
  const auto file = safetensors::load(fixture(fixture_name + ".safetensors"));
  VisionTransformer model(config);
  KeyMapping km;
  km.prefix = "weights.";
  load_state_dict(*model, remap_keys(file, km));
  model->eval();
  to_cuda(*model, dtype);
  torch::NoGradGuard ng;
  const auto features = model->forward_features(file.at("input").to(torch::kCUDA, dtype));
  const auto pooled = model->forward_head(features, /*pre_logits=*/true).to(torch::kCPU);
  const double e = rel_error(features.to(torch::kCPU), file.at("forward_features"));
  const double ep = rel_error(pooled, file.at("pooled"));
  std::cout << fixture_name << " on CUDA " << name << ": forward_features rel err " << e << ", pooled " << ep << "\n";
  EXPECT_LT(e, tol);
  EXPECT_LT(ep, tol);
}

void check_swin_unetr_fs12(torch::ScalarType dtype, const char* name, double tol) {
  TESSERA_REQUIRE_FIXTURE("swin_unetr_fs12_io.safetensors");
  const auto io = safetensors::load(fixture("swin_unetr_fs12_io.safetensors"));
  SwinUNETR model(swin_unetr_fs12_config());
  load_weights(*model, {fixture("swin_unetr_fs12_weights-1of2.safetensors"), fixture("swin_unetr_fs12_weights-2of2.safetensors")});
  model->eval();
  to_cuda(*model, dtype);
  torch::NoGradGuard ng;
  const auto x = io.at("input").to(torch::kCUDA, dtype);
  const auto hs = model->hidden_states(x);
  for (int i = 0; i < 5; ++i) {
    const double e = rel_error(hs[i].to(torch::kCPU), io.at("swinViT.hidden_states." + std::to_string(i)));
    std::cout << "swin_unetr_fs12 on CUDA " << name << ": hidden_states." << i << " rel err " << e << "\n";
    EXPECT_LT(e, tol) << "hidden state " << i;
  }
  const double e = rel_error(model->decode(x, hs).to(torch::kCPU), io.at("output"));
  std::cout << "swin_unetr_fs12 on CUDA " << name << ": output rel err " << e << "\n";
  EXPECT_LT(e, tol);
}

void check_videomae_tiny(torch::ScalarType dtype, const char* name, double tol) {
  TESSERA_REQUIRE_FIXTURE("videomae_tiny_hf_input.safetensors");
  const auto w = safetensors::load(fixture("videomae_tiny_hf.safetensors"));
  const auto io = safetensors::load(fixture("videomae_tiny_hf_input.safetensors"));
  VideoMAEModel model(videomae_tiny_hf_config());
  KeyMapping km;
  km.prefix = "weights.";
  load_state_dict(*model, remap_keys(w, km));
  model->eval();
  to_cuda(*model, dtype);
  torch::NoGradGuard ng;
  const auto out = model->forward(io.at("input").to(torch::kCUDA, dtype)).to(torch::kCPU);
  const double e = rel_error(out, w.at("output"));  // the fixture keeps the reference output beside the weights
  std::cout << "videomae_tiny_hf on CUDA " << name << ": last_hidden_state rel err " << e << "\n";
  EXPECT_LT(e, tol);
}

// Prov-GigaPath's slide encoder (dilated attention over 3,001 tiles): encoder_out and the slide embedding.
void check_gigapath_slide_tiny(torch::ScalarType dtype, const char* name, double tol) {
  TESSERA_REQUIRE_FIXTURE("gigapath_slide_tiny_io.safetensors");
  LongNetViT model(gigapath_slide_tiny_config());
  load_longnet_vit_weights(*model, {fixture("gigapath_slide_tiny_w.safetensors")}, {"weights."});
  model->eval();
  to_cuda(*model, dtype);
  const auto x = safetensors::load(fixture("gigapath_slide_tiny_x0.safetensors")).at("tile_embeddings").to(torch::kCUDA);
  const auto io = safetensors::load(fixture("gigapath_slide_tiny_io.safetensors"));
  const auto coords = io.at("coords").to(torch::kCUDA);
  torch::NoGradGuard ng;
  const double e = rel_error(model->forward_features(x, coords).to(torch::kCPU), io.at("encoder_out"));
  const double es = rel_error(model->forward(x, coords)[0].to(torch::kCPU), io.at("slide_embedding"));
  std::cout << "gigapath_slide_tiny on CUDA " << name << ": encoder_out rel err " << e << ", slide_embedding " << es
            << "\n";
  EXPECT_LT(e, tol);
  EXPECT_LT(es, tol);
}

// fp32 must be fp32 all the way: no TF32 in cuBLAS/cuDNN around the attention kernels.
struct NoTf32 {
  NoTf32() {
    at::globalContext().setAllowTF32CuBLAS(false);
    at::globalContext().setAllowTF32CuDNN(false);
  }
};

TEST(ModelsCuda, VitTinyBf16MatchesFixture) {
  REQUIRE_CUDA();
  check_vit("vit_tiny_timm", vit_tiny_timm_config(), torch::kBFloat16, "bf16", 2e-2);
}
TEST(ModelsCuda, VitRegBf16MatchesFixture) {
  REQUIRE_CUDA();
  check_vit("vit_reg_timm", vit_reg_timm_config(), torch::kBFloat16, "bf16", 2e-2);
}
TEST(ModelsCuda, SwinUnetrFs12Bf16MatchesFixture) { REQUIRE_CUDA(); check_swin_unetr_fs12(torch::kBFloat16, "bf16", 2e-2); }
TEST(ModelsCuda, VideoMaeTinyBf16MatchesFixture) { REQUIRE_CUDA(); check_videomae_tiny(torch::kBFloat16, "bf16", 2e-2); }
TEST(ModelsCuda, GigaPathSlideTinyBf16MatchesFixture) {
  REQUIRE_CUDA();
  check_gigapath_slide_tiny(torch::kBFloat16, "bf16", 2e-2);
}
TEST(ModelsCuda, VitTinyFp32MatchesFixture) {
  REQUIRE_CUDA();
  NoTf32 g;
  check_vit("vit_tiny_timm", vit_tiny_timm_config(), torch::kFloat, "fp32", 1e-4);
}
TEST(ModelsCuda, VitRegFp32MatchesFixture) {
  REQUIRE_CUDA();
  NoTf32 g;
  check_vit("vit_reg_timm", vit_reg_timm_config(), torch::kFloat, "fp32", 1e-4);
}
TEST(ModelsCuda, SwinUnetrFs12Fp32MatchesFixture) { REQUIRE_CUDA(); NoTf32 g; check_swin_unetr_fs12(torch::kFloat, "fp32", 1e-4); }
TEST(ModelsCuda, VideoMaeTinyFp32MatchesFixture) { REQUIRE_CUDA(); NoTf32 g; check_videomae_tiny(torch::kFloat, "fp32", 1e-4); }
TEST(ModelsCuda, GigaPathSlideTinyFp32MatchesFixture) {
  REQUIRE_CUDA();
  NoTf32 g;
  check_gigapath_slide_tiny(torch::kFloat, "fp32", 1e-4);
}

}  // namespace
}  // namespace tessera::models
