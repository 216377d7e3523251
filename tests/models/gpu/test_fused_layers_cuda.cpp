// The fused residual + LayerScale + LayerNorm step and the packed GLU on CUDA against float64 references:
// every dtype, rows whose width is not a whole number of 16-byte packs (the scalar path), the optional parts
// left out, NaN confined to its row, poisoned outputs written everywhere through the raw kernels, and a ViT
// with LayerScale, registers and SwiGLU taking the fused path to the same features as the block-by-block
// one. Label `gpu`; skipped without a device.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <tuple>

#include "../../require_cuda.h"
#include "../encoder_configs.h"
#include "../fixtures.h"
#include "tessera/models/fused_layers.h"
#include "tessera/models/vit.h"
#ifdef TESSERA_TEST_MODEL_KERNELS
#include <c10/cuda/CUDAStream.h>

#include "glu.h"
#include "residual_norm.h"
#endif

namespace tessera::models {
namespace {

using testing::rel_error;

double tolerance(torch::ScalarType t) { return t == torch::kFloat ? 2e-6 : t == torch::kHalf ? 1e-3 : 8e-3; }

torch::Tensor cpu64(const torch::Tensor& t) { return t.to(torch::kCPU, torch::kDouble); }

torch::Tensor random(std::vector<int64_t> shape, torch::ScalarType dtype, double scale, double shift) {
  return (torch::randn(shape, torch::TensorOptions().device(torch::kCUDA)) * scale + shift).to(dtype);
}

// rows, cols, dtype, with y, with gamma, with the norm's affine
using NormCase = std::tuple<int64_t, int64_t, torch::ScalarType, bool, bool, bool>;

class FusedResidualNorm : public ::testing::TestWithParam<NormCase> {};

TEST_P(FusedResidualNorm, MatchesFloat64) {
  REQUIRE_CUDA();
  torch::NoGradGuard ng;
  const auto& [rows, cols, dtype, with_y, with_gamma, affine] = GetParam();
  torch::manual_seed(11);
  const auto x0 = random({rows, cols}, dtype, 2.0, 0.3);
  const torch::Tensor y = with_y ? random({rows, cols}, dtype, 1.5, -0.2) : torch::Tensor();
  const torch::Tensor gamma = with_gamma ? random({cols}, dtype, 0.5, 0.1) : torch::Tensor();
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({cols}).eps(1e-6).elementwise_affine(affine));
  norm->to(torch::kCUDA, dtype);
  if (affine) {
    norm->weight.copy_(random({cols}, dtype, 0.3, 1.0));
    norm->bias.copy_(random({cols}, dtype, 0.3, 0.0));
  }
  torch::Tensor x = x0.clone();
  ASSERT_TRUE(fused_layers_available(x));
  const torch::Tensor out = add_and_norm_(x, y, gamma, norm);
  ASSERT_EQ(out.scalar_type(), dtype);

  torch::Tensor want_x = cpu64(x0);
  if (with_y) want_x = want_x + (with_gamma ? cpu64(gamma) : torch::ones({cols}, torch::kDouble)) * cpu64(y);
  EXPECT_LT(rel_error(x.cpu(), want_x), tolerance(dtype)) << "x ← x + gamma y, " << rows << "x" << cols << " " << dtype;
  // The norm is of x as stored.
  const auto xs = cpu64(x);
  const auto mean = xs.mean(-1, true);
  auto want = (xs - mean) / ((xs - mean).pow(2).mean(-1, true) + 1e-6).sqrt();
  if (affine) want = want * cpu64(norm->weight) + cpu64(norm->bias);
  EXPECT_LT(rel_error(out.cpu(), want), tolerance(dtype)) << "LayerNorm, " << rows << "x" << cols << " " << dtype;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FusedResidualNorm,
    ::testing::Values(NormCase{514, 1536, torch::kBFloat16, true, true, true},   // UNI2-h / ViT-g rows
                      NormCase{257, 1280, torch::kBFloat16, true, true, true},   // Virchow2
                      NormCase{300, 1024, torch::kHalf, true, false, true},
                      NormCase{97, 192, torch::kFloat, true, true, false},
                      NormCase{33, 100, torch::kBFloat16, true, true, true},     // not whole packs: scalar path
                      NormCase{5, 4100, torch::kFloat, true, false, true},       // more columns than threads
                      NormCase{64, 768, torch::kBFloat16, false, false, true},   // norm only
                      NormCase{1, 12288, torch::kBFloat16, true, true, true}));  // the widest row it stages

TEST(FusedResidualNormEdges, AddWithoutNormUpdatesXOnly) {
  REQUIRE_CUDA();
  torch::NoGradGuard ng;
  torch::manual_seed(5);
  const auto x0 = random({40, 256}, torch::kBFloat16, 1.0, 0.0);
  const auto y = random({40, 256}, torch::kBFloat16, 1.0, 0.0);
  const auto gamma = random({256}, torch::kBFloat16, 1.0, 0.0);
  torch::Tensor x = x0.clone();
  EXPECT_FALSE(add_and_norm_(x, y, gamma, nullptr).defined());
  EXPECT_LT(rel_error(x.cpu(), cpu64(x0) + cpu64(gamma) * cpu64(y)), tolerance(torch::kBFloat16));
}

TEST(FusedResidualNormEdges, NaNStaysInItsRow) {
  REQUIRE_CUDA();
  torch::NoGradGuard ng;
  torch::Tensor x = random({6, 1536}, torch::kBFloat16, 1.0, 0.0);
  auto y = random({6, 1536}, torch::kBFloat16, 1.0, 0.0);
  y[3][777] = std::nan("");
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({1536}));
  norm->to(torch::kCUDA, torch::kBFloat16);
  const auto out = add_and_norm_(x, y, {}, norm).cpu();
  EXPECT_TRUE(out[3].isnan().all().item<bool>());  // as PyTorch: the row's mean and variance are NaN
  EXPECT_TRUE(out.index_select(0, torch::tensor({0, 1, 2, 4, 5}, torch::kLong)).isfinite().all().item<bool>());
  EXPECT_TRUE(std::isnan(x[3][777].item<float>()));
}

TEST(FusedResidualNormEdges, AutogradTakesLibTorchsOps) {
  REQUIRE_CUDA();
  auto x = torch::randn({4, 64}, torch::TensorOptions().device(torch::kCUDA).requires_grad(true));
  EXPECT_FALSE(fused_layers_available(x));
  torch::Tensor h = x * 1.0;  // not a leaf: the fallback adds in place
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({64}));
  norm->to(torch::kCUDA);
  add_and_norm_(h, torch::ones_like(h), {}, norm).sum().backward();
  EXPECT_TRUE(x.grad().defined());
}

using GluCase = std::tuple<int64_t, int64_t, torch::ScalarType, bool>;  // rows, hidden, dtype, silu

class FusedGlu : public ::testing::TestWithParam<GluCase> {};

TEST_P(FusedGlu, MatchesFloat64) {
  REQUIRE_CUDA();
  torch::NoGradGuard ng;
  const auto& [rows, hidden, dtype, silu] = GetParam();
  torch::manual_seed(13);
  const auto h = random({rows, 2 * hidden}, dtype, 2.5, 0.0);
  const auto out = packed_glu(h, silu);
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{rows, hidden}));
  const auto d = cpu64(h);
  const auto g = d.narrow(1, 0, hidden), v = d.narrow(1, hidden, hidden);
  const auto act = silu ? g * torch::sigmoid(g) : 0.5 * g * (1 + torch::erf(g / std::sqrt(2.0)));
  EXPECT_LT(rel_error(out.cpu(), act * v), tolerance(dtype)) << rows << "x" << hidden << " " << dtype;
}

INSTANTIATE_TEST_SUITE_P(Shapes, FusedGlu,
                         ::testing::Values(GluCase{2056, 4096, torch::kBFloat16, true},  // UNI2-h's packed SwiGLU
                                           GluCase{257, 3416, torch::kBFloat16, true},   // Virchow2's
                                           GluCase{100, 384, torch::kHalf, false},
                                           GluCase{31, 250, torch::kFloat, true},
                                           GluCase{7, 13, torch::kBFloat16, false}));   // not whole packs

TEST(FusedGluEdges, NaNStaysInItsElement) {
  REQUIRE_CUDA();
  torch::NoGradGuard ng;
  auto h = random({4, 64}, torch::kBFloat16, 1.0, 0.0);
  h[2][5] = std::nan("");
  const auto out = packed_glu(h, true).cpu();
  EXPECT_TRUE(std::isnan(out[2][5].item<float>()));
  EXPECT_EQ(out.isnan().sum().item<int64_t>(), 1);
}

#ifdef TESSERA_TEST_MODEL_KERNELS
TEST(FusedLayerKernels, WriteEveryElement) {
  REQUIRE_CUDA();
  torch::NoGradGuard ng;
  const auto stream = c10::cuda::getCurrentCUDAStream().stream();
  const auto x = random({37, 1001}, torch::kHalf, 1.0, 0.0);
  auto out = torch::full_like(x, std::nan(""));  // poison
  cuda::ResidualNormArgs a;
  a.dtype = cuda::DType::f16;
  a.x = x.data_ptr();
  a.out = out.data_ptr();
  a.rows = 37;
  a.cols = 1001;
  a.stream = stream;
  cuda::residual_norm(a);
  EXPECT_TRUE(out.isfinite().all().item<bool>());

  const auto h = random({37, 2 * 1001}, torch::kBFloat16, 1.0, 0.0);
  auto g = torch::full({37, 1001}, std::nan(""), h.options());
  cuda::GluArgs b;
  b.dtype = cuda::DType::bf16;
  b.h = h.data_ptr();
  b.out = g.data_ptr();
  b.rows = 37;
  b.hidden = 1001;
  b.stream = stream;
  cuda::packed_glu(b);
  EXPECT_TRUE(g.isfinite().all().item<bool>());
}
#endif

// UNI2-h's block layout at toy size: the fused inference path gives the block-by-block features.
TEST(FusedViT, SameFeaturesAsTheBlockPath) {
  REQUIRE_CUDA();
  ViTConfig c = testing::encoder_config("uni2_h");
  c.img_size = 28;
  c.embed_dim = 96;
  c.depth = 3;
  c.num_heads = 2;
  for (const auto& [pool, fc_norm] : {std::pair<std::string, bool>{"token", false}, {"avg", true}}) {
    c.global_pool = pool;
    c.fc_norm = fc_norm;
    torch::manual_seed(17);
    VisionTransformer vit(c);
    {
      torch::NoGradGuard ng;  // LayerScale at 1e-5 would hide the sublayers: make it matter
      for (auto& p : vit->named_parameters())
        if (p.key().find("gamma") != std::string::npos) p.value().uniform_(0.5, 1.5);
    }
    vit->to(torch::kCUDA);
    const auto img = torch::randn({3, 3, 42, 28}, torch::TensorOptions().device(torch::kCUDA));
    const auto grad_input = img.clone().requires_grad_(true);  // autograd: LibTorch's block-by-block ops
    const auto blocks = vit->forward_features(grad_input).detach();
    torch::NoGradGuard ng;
    ASSERT_TRUE(fused_layers_available(img));
    const auto fused = vit->forward_features(img);
    EXPECT_LT(rel_error(fused.cpu(), blocks.cpu()), 2e-6) << pool;
    EXPECT_LT(rel_error(vit->forward_head(fused, true).cpu(), vit->forward_head(blocks, true).cpu()), 2e-6) << pool;
  }
}

}  // namespace
}  // namespace tessera::models
