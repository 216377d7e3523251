// The LibTorch op on CUDA with a constant mask whose packed copy the op keeps across calls
// (bias_cache.h): results follow the mask through repeated calls, in-place changes and a
// new tensor in place of a freed one, against a float64 reference each time. Skipped
// without a CUDA device. With TESSERA_BIAS_CACHE=0 the same results are checked and the
// cache's entry counts are not.
#include <gtest/gtest.h>

#include <random>
#include <torch/torch.h>

#include "../require_cuda.h"
#include "bias_cache.h"
#include "tessera/torch/attention.h"

namespace {

using tessera::torch_ops::AttentionOptions;
using tessera::torch_ops::attention;
using torch::Tensor;

constexpr int64_t kImgs = 2, kNw = 4, kB = kImgs * kNw, kN = 49, kH = 3, kD = 16;

struct Result {
  Tensor out, lse, dq, dk, dv, drel;
};

double rel(const Tensor& a, const Tensor& b) {
  EXPECT_FALSE(torch::isnan(a).any().item<bool>()) << "NaN in result";
  auto ad = a.to(torch::kCPU, torch::kDouble), bd = b.to(torch::kCPU, torch::kDouble);
  return ((ad - bd).norm() / bd.norm().clamp_min(1e-30)).item<double>();
}

Tensor leaf(const Tensor& t) { return t.detach().requires_grad_(true); }

// A Swin-like mask [nW, 1, N, N]: -100 between random groups of tokens, 0 on the diagonal.
Tensor random_mask(torch::TensorOptions o) {
  auto m = torch::where(torch::rand({kNw, 1, kN, kN}) < 0.4, -100.0, 0.0);
  m = m * (1 - torch::eye(kN));
  return m.to(o.device(), o.dtype());
}

struct Case {
  Tensor q, k, v, rel_bias, g, gl;
  Case() {
    const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
    q = leaf(torch::randn({kB, kN, kH, kD}, o));
    k = leaf(torch::randn({kB, kN, kH, kD}, o));
    v = leaf(torch::randn({kB, kN, kH, kD}, o));
    rel_bias = leaf(torch::randn({kH, kN, kN}, o));
    g = torch::randn({kB, kN, kH, kD}, o);
    gl = torch::randn({kB, kH, kN}, o.dtype(torch::kFloat));
  }
  void clear() {
    for (auto* t : {&q, &k, &v, &rel_bias}) t->mutable_grad() = Tensor();
  }
  Result run(const Tensor& mask) {
    clear();
    AttentionOptions opts;
    opts.bias = rel_bias;
    opts.mask = mask;
    auto [out, lse] = attention(q, k, v, opts);
    ((out.to(torch::kFloat) * g.to(torch::kFloat)).sum() + (lse * gl).sum()).backward();
    return {out.detach(), lse.detach(), q.grad(), k.grad(), v.grad(), rel_bias.grad()};
  }
  Result reference(const Tensor& mask) {
    auto cpu = [](const Tensor& t) { return leaf(t.detach().to(torch::kCPU, torch::kDouble)); };
    auto qd = cpu(q), kd = cpu(k), vd = cpu(v), bd = cpu(rel_bias);
    auto md = mask.detach().to(torch::kCPU, torch::kDouble);
    auto s = qd.permute({0, 2, 1, 3}).matmul(kd.permute({0, 2, 3, 1})) / std::sqrt(double(kD));
    s = (s.view({kImgs, kNw, kH, kN, kN}) + bd + md.unsqueeze(0)).view({kB, kH, kN, kN});
    auto lse = torch::logsumexp(s, -1);
    auto out = torch::softmax(s, -1).matmul(vd.permute({0, 2, 1, 3})).permute({0, 2, 1, 3});
    ((out * g.to(torch::kCPU, torch::kDouble)).sum() + (lse * gl.to(torch::kCPU, torch::kDouble)).sum()).backward();
    return {out, lse, qd.grad(), kd.grad(), vd.grad(), bd.grad()};
  }
};

void expect_matches(const Result& r, const Result& ref, const char* what) {
  SCOPED_TRACE(what);
  EXPECT_LT(rel(r.out, ref.out), 1e-2);
  EXPECT_LT(rel(r.lse, ref.lse), 1e-3);
  EXPECT_LT(rel(r.dq, ref.dq), 2e-2);
  EXPECT_LT(rel(r.dk, ref.dk), 2e-2);
  EXPECT_LT(rel(r.dv, ref.dv), 2e-2);
  EXPECT_LT(rel(r.drel, ref.drel), 2e-2);
}

TEST(TorchOpCuda, CachedMaskFollowsItsTensor) {
  REQUIRE_CUDA();
  auto* cache = tessera::torch_ops::detail::bias_cache();  // null: TESSERA_BIAS_CACHE=0
  auto expect_entries = [&](size_t n) {
    if (cache) EXPECT_EQ(cache->entries(), n);
  };
  torch::manual_seed(std::random_device{}());
  if (cache) cache->clear();
  Case c;
  const auto mo = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  Tensor mask = random_mask(mo);

  const Result first = c.run(mask);
  expect_matches(first, c.reference(mask), "first call");
  // the mask's forward and backward copies are cached (the relative bias, which has a
  // gradient, is not)
  expect_entries(2);
  const Result again = c.run(mask);
  EXPECT_TRUE(torch::equal(again.out, first.out));
  expect_entries(2);

  // in place, through a view: the cached copies are stale and must not be used
  mask.narrow(0, 1, 2).copy_(random_mask(mo).narrow(0, 1, 2));
  const Result changed = c.run(mask);
  expect_matches(changed, c.reference(mask), "after an in-place change");
  EXPECT_GT(rel(changed.out, first.out), 1e-2);
  expect_entries(2);

  // a view made per call, as the models pass mask.unsqueeze(1) of a [nW, N, N] buffer
  Tensor buffer = random_mask(mo).squeeze(1).contiguous();
  const Result view1 = c.run(buffer.unsqueeze(1));
  const Result view2 = c.run(buffer.unsqueeze(1));
  expect_matches(view2, c.reference(buffer.unsqueeze(1)), "per-call view");
  EXPECT_TRUE(torch::equal(view1.out, view2.out));

  // freed, and a new mask (perhaps at the same address) with other values
  mask = Tensor();
  buffer = Tensor();
  Tensor fresh = random_mask(mo);
  expect_matches(c.run(fresh), c.reference(fresh), "a new tensor");
  expect_entries(2);  // the freed masks' copies are gone
}

}  // namespace
