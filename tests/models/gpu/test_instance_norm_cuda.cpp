// The fused instance norm (+ residual, + LeakyReLU) on CUDA against a float64 reference of MONAI's
// UnetResBlock arithmetic: every dtype, planes not a multiple of the vector width (the scalar path),
// planes spread over many blocks, a large mean (cancellation), NaN confined to its plane, and the
// raw kernel writing every element of a poisoned output. Label `gpu`; skipped without a device.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <tuple>

#include "../../require_cuda.h"
#include "../fixtures.h"
#include "tessera/models/instance_norm.h"
#ifdef TESSERA_TEST_MODEL_KERNELS
#include <c10/cuda/CUDAStream.h>

#include "instance_norm.h"
#endif

namespace tessera::models {
namespace {

using testing::rel_error;

torch::Tensor reference_in(const torch::Tensor& x) {
  const auto d = x.to(torch::kCPU, torch::kDouble);
  const auto f = d.flatten(2);
  const auto mean = f.mean(-1, true);
  const auto var = (f - mean).pow(2).mean(-1, true);
  return ((f - mean) / (var + 1e-5).sqrt()).view(d.sizes());
}

// act(IN(x) + r) in float64 from the (already rounded) inputs.
torch::Tensor reference(const torch::Tensor& x, const torch::Tensor& res, bool normalize, std::optional<double> slope) {
  auto y = reference_in(x);
  if (res.defined()) y = y + (normalize ? reference_in(res) : res.to(torch::kCPU, torch::kDouble));
  if (slope) y = torch::where(y > 0, y, y * *slope);
  return y;
}

double tolerance(torch::ScalarType t) { return t == torch::kFloat ? 2e-6 : t == torch::kHalf ? 1e-3 : 5e-3; }

using Case = std::tuple<std::vector<int64_t>, torch::ScalarType, int /*0 none, 1 as is, 2 normalised*/, bool /*lrelu*/>;

class FusedInstanceNorm : public ::testing::TestWithParam<Case> {};

TEST_P(FusedInstanceNorm, MatchesFloat64) {
  REQUIRE_CUDA();
  torch::NoGradGuard ng;
  const auto& [shape, dtype, residual_kind, lrelu] = GetParam();
  torch::manual_seed(7);
  const auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(dtype);
  const auto x = (torch::randn(shape, opts.dtype(torch::kFloat)) * 3 + 0.5).to(dtype);
  torch::Tensor res;
  if (residual_kind) res = (torch::randn(shape, opts.dtype(torch::kFloat)) * 2 - 1).to(dtype);
  const std::optional<double> slope = lrelu ? std::optional<double>(0.01) : std::nullopt;
  ASSERT_TRUE(instance_norm_fused(x, res));
  const auto y = instance_norm_act(x, res, residual_kind == 2, slope);
  ASSERT_EQ(y.scalar_type(), dtype);
  ASSERT_EQ(y.sizes(), x.sizes());
  const double e = rel_error(y.cpu(), reference(x, res, residual_kind == 2, slope));
  EXPECT_LT(e, tolerance(dtype)) << "shape " << x.sizes() << " dtype " << dtype;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FusedInstanceNorm,
    ::testing::Values(Case{{2, 3, 5, 7, 9}, torch::kBFloat16, 0, true},        // 315 voxels: scalar path
                      Case{{2, 3, 5, 7, 9}, torch::kFloat, 2, true},
                      Case{{1, 4, 40, 40, 40}, torch::kBFloat16, 2, true},     // 64,000 voxels: 8 blocks a plane
                      Case{{1, 4, 40, 40, 40}, torch::kHalf, 1, true},
                      Case{{1, 4, 40, 40, 40}, torch::kFloat, 1, false},
                      Case{{2, 6, 96, 96, 96}, torch::kBFloat16, 1, true},     // a Swin UNETR window's full resolution
                      Case{{2, 6, 96, 96, 96}, torch::kFloat, 0, false},
                      Case{{4, 768, 3, 3, 3}, torch::kBFloat16, 2, true}));    // the deepest level: many tiny planes

TEST(FusedInstanceNormEdges, LargeMeanKeepsItsVariance) {
  REQUIRE_CUDA();
  torch::NoGradGuard ng;
  torch::manual_seed(3);
  const auto x = torch::randn({1, 2, 64, 64, 64}, torch::TensorOptions().device(torch::kCUDA)) * 0.01 + 1000.0;
  const double e = rel_error(instance_norm_act(x).cpu(), reference(x, {}, false, std::nullopt));
  EXPECT_LT(e, 1e-5);  // a mean formed as 1000 + m would carry fp32's 3e-5 rounding at 1000: 3e-3 of the 0.01 spread
}

TEST(FusedInstanceNormEdges, NaNStaysInItsPlane) {
  REQUIRE_CUDA();
  torch::NoGradGuard ng;
  auto x = torch::randn({1, 3, 20, 20, 20}, torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16));
  x.select(1, 1).view(-1)[4321] = std::nan("");
  const auto y = instance_norm_act(x, {}, false, 0.01).cpu();
  EXPECT_TRUE(y.select(1, 1).isnan().all().item<bool>());  // as PyTorch: the plane's mean and variance are NaN
  EXPECT_TRUE(y.select(1, 0).isfinite().all().item<bool>());
  EXPECT_TRUE(y.select(1, 2).isfinite().all().item<bool>());
}

TEST(FusedInstanceNormEdges, AutogradTakesLibTorchsOps) {
  REQUIRE_CUDA();
  const auto x = torch::randn({1, 2, 8, 8, 8}, torch::TensorOptions().device(torch::kCUDA).requires_grad(true));
  EXPECT_FALSE(instance_norm_fused(x));
  instance_norm_act(x, {}, false, 0.01).sum().backward();
  EXPECT_TRUE(x.grad().defined());
}

#ifdef TESSERA_TEST_MODEL_KERNELS
TEST(FusedInstanceNormEdges, KernelWritesEveryElement) {
  REQUIRE_CUDA();
  torch::NoGradGuard ng;
  const auto x = torch::randn({3, 5, 1001}, torch::TensorOptions().device(torch::kCUDA).dtype(torch::kHalf));
  auto y = torch::full_like(x, std::nan(""));  // poison
  const auto ws = torch::empty({cuda::workspace_floats(15, 1001, false)}, x.options().dtype(torch::kFloat));
  cuda::InstanceNormArgs a;
  a.dtype = cuda::DType::f16;
  a.x = x.data_ptr();
  a.y = y.data_ptr();
  a.planes = 15;
  a.size = 1001;
  a.workspace = ws.data_ptr<float>();
  a.stream = c10::cuda::getCurrentCUDAStream().stream();
  cuda::instance_norm(a);
  EXPECT_TRUE(y.isfinite().all().item<bool>());
  EXPECT_LT(rel_error(y.cpu(), reference(x, {}, false, std::nullopt)), tolerance(torch::kHalf));
}
#endif

}  // namespace
}  // namespace tessera::models
