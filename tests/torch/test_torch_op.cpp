// The LibTorch op: autograd gradients for q, k, v, bias, mask and lse against
// a float64 matmul-softmax-matmul written with LibTorch, plus argument errors.
#include <gtest/gtest.h>

#include <random>
#include <torch/torch.h>

#include "tessera/torch/attention.h"

namespace {

using tessera::torch_ops::AttentionOptions;
using tessera::torch_ops::attention;
using torch::Tensor;

struct Naive {
  Tensor out, lse;
};

// q [B, Nq, H, D], k/v [B, Nk, Hkv, D]; bias broadcastable to [B, H, Nq, Nk]
// after `arrange` (which lets a test express Swin's tiled mask).
Naive naive(const Tensor& q, const Tensor& k, const Tensor& v, const std::function<Tensor(Tensor)>& add_terms,
            bool causal, double scale) {
  auto qd = q.to(torch::kDouble).permute({0, 2, 1, 3});
  auto kd = k.to(torch::kDouble).permute({0, 2, 1, 3});
  auto vd = v.to(torch::kDouble).permute({0, 2, 1, 3});
  const int64_t group = q.size(2) / k.size(2);
  kd = kd.repeat_interleave(group, 1);
  vd = vd.repeat_interleave(group, 1);
  auto s = qd.matmul(kd.transpose(-1, -2)) * scale;
  if (add_terms) s = add_terms(s);
  if (causal) {
    const int64_t nq = q.size(1), nk = k.size(1);
    auto i = torch::arange(nq).unsqueeze(1) + (nk - nq);
    auto j = torch::arange(nk).unsqueeze(0);
    s = s.masked_fill(j > i, -std::numeric_limits<double>::infinity());
  }
  auto lse = torch::logsumexp(s, -1);
  auto out = torch::softmax(s, -1).matmul(vd).permute({0, 2, 1, 3});
  return {out, lse};
}

double rel(const Tensor& a, const Tensor& b) {
  EXPECT_FALSE(torch::isnan(a).any().item<bool>()) << "NaN in result";
  auto ad = a.to(torch::kDouble), bd = b.to(torch::kDouble);
  return ((ad - bd).norm() / bd.norm().clamp_min(1e-30)).item<double>();
}

Tensor leaf(Tensor t) { return t.detach().requires_grad_(true); }

TEST(TorchOp, GradientsMatchFloat64WithSwinBiasAndMask) {
  torch::manual_seed(std::random_device{}());
  const int64_t imgs = 2, nW = 3, B = imgs * nW, N = 49, H = 3, D = 16;
  auto q = leaf(torch::randn({B, N, H, D}));
  auto k = leaf(torch::randn({B, N, H, D}));
  auto v = leaf(torch::randn({B, N, H, D}));
  auto bias = leaf(torch::randn({H, N, N}) * 0.5);                                    // shared by all windows
  auto mask = leaf(torch::where(torch::rand({nW, 1, N, N}) < 0.3, -100.0, 0.0).to(torch::kFloat));  // per window
  AttentionOptions o;
  o.bias = bias;
  o.mask = mask;
  auto [out, lse] = attention(q, k, v, o);
  auto g = torch::randn_like(out);
  auto gl = torch::randn_like(lse);
  ((out * g).sum() + (lse * gl).sum()).backward();

  auto qd = leaf(q.to(torch::kDouble)), kd = leaf(k.to(torch::kDouble)), vd = leaf(v.to(torch::kDouble));
  auto bd = leaf(bias.to(torch::kDouble)), md = leaf(mask.to(torch::kDouble));
  auto ref = naive(qd, kd, vd, [&](Tensor s) {
    return (s.view({imgs, nW, H, N, N}) + bd + md.unsqueeze(0)).view({B, H, N, N});
  }, false, 1.0 / std::sqrt(double(D)));
  ((ref.out * g.to(torch::kDouble)).sum() + (ref.lse * gl.to(torch::kDouble)).sum()).backward();

  EXPECT_LT(rel(out, ref.out), 1e-5);
  EXPECT_LT(rel(lse, ref.lse), 1e-5);
  EXPECT_LT(rel(q.grad(), qd.grad()), 1e-5);
  EXPECT_LT(rel(k.grad(), kd.grad()), 1e-5);
  EXPECT_LT(rel(v.grad(), vd.grad()), 1e-5);
  EXPECT_LT(rel(bias.grad(), bd.grad()), 1e-5);
  EXPECT_LT(rel(mask.grad(), md.grad()), 1e-5);
  EXPECT_EQ(bias.grad().sizes(), bias.sizes());
  EXPECT_EQ(mask.grad().sizes(), mask.sizes());
}

TEST(TorchOp, CausalGqaStridedInputs) {
  torch::manual_seed(std::random_device{}());
  const int64_t B = 2, Nq = 65, Nk = 130, Hq = 8, Hkv = 2, D = 32;
  // q arrives as a permuted view of a [B, H, N, D] tensor: strides must be honoured.
  auto qb = leaf(torch::randn({B, Hq, Nq, D}));
  auto q = qb.permute({0, 2, 1, 3});
  auto k = leaf(torch::randn({B, Nk, Hkv, D}));
  auto v = leaf(torch::randn({B, Nk, Hkv, D}));
  AttentionOptions o;
  o.causal = true;
  o.scale = 0.3;
  auto [out, lse] = attention(q, k, v, o);
  auto g = torch::randn_like(out);
  (out * g).sum().backward();
  auto qd = leaf(qb.to(torch::kDouble)), kd = leaf(k.to(torch::kDouble)), vd = leaf(v.to(torch::kDouble));
  auto ref = naive(qd.permute({0, 2, 1, 3}), kd, vd, nullptr, true, 0.3);
  (ref.out * g.to(torch::kDouble)).sum().backward();
  EXPECT_LT(rel(out, ref.out), 1e-5);
  EXPECT_LT(rel(qb.grad(), qd.grad()), 1e-5);
  EXPECT_LT(rel(k.grad(), kd.grad()), 1e-5);
  EXPECT_LT(rel(v.grad(), vd.grad()), 1e-5);
}

TEST(TorchOp, VarlenEqualsPerSequenceCalls) {
  torch::manual_seed(std::random_device{}());
  const std::vector<int64_t> lens = {5, 70, 33};
  const int64_t H = 2, D = 16, total = 108;
  auto q = leaf(torch::randn({total, H, D}));
  auto k = leaf(torch::randn({total, H, D}));
  auto v = leaf(torch::randn({total, H, D}));
  AttentionOptions o;
  o.cu_seqlens_q = torch::tensor({0, 5, 75, 108}, torch::kInt);
  o.cu_seqlens_k = o.cu_seqlens_q;
  o.causal = true;
  auto [out, lse] = attention(q, k, v, o);
  EXPECT_EQ(lse.sizes(), (std::vector<int64_t>{H, total}));
  int64_t start = 0;
  for (int64_t n : lens) {
    AttentionOptions one;
    one.causal = true;
    auto sl = [&](const Tensor& t) { return t.narrow(0, start, n).unsqueeze(0); };
    auto [o1, l1] = attention(sl(q), sl(k), sl(v), one);
    EXPECT_LT(rel(out.narrow(0, start, n), o1.squeeze(0)), 1e-6);
    EXPECT_LT(rel(lse.narrow(1, start, n), l1.squeeze(0)), 1e-6);
    start += n;
  }
  out.sum().backward();
  EXPECT_TRUE(q.grad().defined());
}

TEST(TorchOp, Bfloat16AndAlibi) {
  torch::manual_seed(std::random_device{}());
  const int64_t B = 2, N = 100, H = 4, D = 64;
  auto q = torch::randn({B, N, H, D}).to(torch::kBFloat16);
  auto k = torch::randn({B, N, H, D}).to(torch::kBFloat16);
  auto v = torch::randn({B, N, H, D}).to(torch::kBFloat16);
  auto slopes = torch::rand({H}) * 0.5 + 0.05;
  AttentionOptions o;
  o.alibi_slopes = slopes;
  auto [out, lse] = attention(q, k, v, o);
  EXPECT_EQ(out.scalar_type(), torch::kBFloat16);
  auto ref = naive(q, k, v, [&](Tensor s) {
    auto i = torch::arange(N).unsqueeze(1), j = torch::arange(N).unsqueeze(0);
    auto dist = (i - j).abs().to(torch::kDouble);
    return s - slopes.to(torch::kDouble).view({1, H, 1, 1}) * dist;
  }, false, 1.0 / 8.0);
  EXPECT_LT(rel(out, ref.out), 1e-2);
}

TEST(TorchOp, DropoutIsReproducibleFromSeed) {
  auto q = torch::randn({1, 64, 2, 16}), k = torch::randn({1, 64, 2, 16}), v = torch::randn({1, 64, 2, 16});
  AttentionOptions o;
  o.dropout_p = 0.25;
  o.seed = 1234;
  auto [a, la] = attention(q, k, v, o);
  auto [b, lb] = attention(q, k, v, o);
  EXPECT_TRUE(torch::equal(a, b));
  o.seed = 1235;
  auto [c, lc] = attention(q, k, v, o);
  EXPECT_FALSE(torch::equal(a, c));
  EXPECT_TRUE(torch::allclose(la, lc));  // the LSE is taken before dropout
}

TEST(TorchOp, BadArgumentsGiveClearErrors) {
  auto q = torch::randn({2, 16, 4, 32}), k = torch::randn({2, 16, 2, 32}), v = torch::randn({2, 16, 2, 32});
  auto expect_msg = [](const std::function<void()>& f, const std::string& frag) {
    try {
      f();
      ADD_FAILURE() << "no error, expected '" << frag << "'";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(frag), std::string::npos) << e.what();
    }
  };
  expect_msg([&] { attention(q, k.narrow(3, 0, 16), v); }, "k head dim");
  expect_msg([&] { attention(q.select(0, 0), k, v); }, "q must be [B, N, H, D]");
  expect_msg([&] { attention(q, k.to(torch::kDouble), v); }, "share a dtype");
  expect_msg([&] { attention(q, torch::randn({2, 16, 3, 32}), torch::randn({2, 16, 3, 32})); }, "multiple of heads_kv");
  AttentionOptions o;
  o.bias = torch::randn({3, 4, 16, 16});
  expect_msg([&] { attention(q, k, v, o); }, "must divide the batch");
  o.bias = torch::randn({4, 16, 17});
  expect_msg([&] { attention(q, k, v, o); }, "key length");
  AttentionOptions w;
  w.causal = true;
  w.window_right = 3;
  expect_msg([&] { attention(q, k, v, w); }, "causal attention cannot look right");
  AttentionOptions vl;
  vl.cu_seqlens_q = torch::tensor({0, 10, 5}, torch::kInt);
  vl.cu_seqlens_k = torch::tensor({0, 10, 32}, torch::kInt);
  expect_msg([&] { attention(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), vl); }, "non-decreasing");
}

}  // namespace
