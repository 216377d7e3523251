// The CPU attention path against the float64 reference: every feature and
// their combinations, forward and all gradients, fresh random inputs.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cmath>
#include <limits>

#include "attention_case.h"
#include "reference.h"
#include "tessera/attention/attention.h"

namespace tessera::test {
namespace {

using attention::reference::forward_backward;

void check_case(const Case& c) {
  Problem pr = make_problem(c);
  SCOPED_TRACE(describe(pr.c) + " seed=" + std::to_string(pr.seed));
  const auto ref = forward_backward(pr.p);
  attention::forward(pr.p);
  attention::backward(pr.p);
  const Errors e = compare_backward(pr, ref);
  const double tol = tolerance(pr.c.dtype);
  EXPECT_FALSE(e.has_nan) << "NaN or unwritten output";
  EXPECT_LT(e.o, tol) << "o";
  EXPECT_LT(e.lse, tol) << "lse" << e.detail;
  EXPECT_LT(e.dq, tol) << "dq";
  EXPECT_LT(e.dk, tol) << "dk";
  EXPECT_LT(e.dv, tol) << "dv";
  EXPECT_LT(e.dbias[0], tol) << "dbias[0]";
  EXPECT_LT(e.dbias[1], tol) << "dbias[1]";
}

class CpuAttention : public ::testing::TestWithParam<Case> {};
TEST_P(CpuAttention, MatchesFloat64Reference) { check_case(GetParam()); }

Case mk(std::string name, int b, int nq, int nk, int hq, int hkv, int d) {
  Case c;
  c.name = std::move(name);
  c.batch = b;
  c.nq = nq;
  c.nk = nk;
  c.hq = hq;
  c.hkv = hkv;
  c.d = d;
  return c;
}

std::vector<Case> sizes() {
  std::vector<Case> v;
  for (int n : {1, 7, 63, 65, 300, 343, 1000}) v.push_back(mk("ragged_n" + std::to_string(n), 1, n, n, 2, 2, 64));
  for (int d : {1, 4, 8, 16, 32, 64, 80, 128, 256}) v.push_back(mk("head_dim" + std::to_string(d), 2, 65, 65, 2, 2, d));
  v.push_back(mk("d256_n300", 1, 300, 300, 1, 1, 256));
  v.push_back(mk("d4_n1000", 1, 1000, 1000, 1, 1, 4));
  auto c = mk("dv_differs", 2, 63, 70, 2, 2, 32);
  c.dv = 80;
  v.push_back(c);
  v.push_back(mk("nq_lt_nk", 2, 7, 300, 2, 2, 32));
  v.push_back(mk("nq_gt_nk", 2, 300, 65, 2, 2, 32));
  v.push_back(mk("single_query", 3, 1, 343, 2, 2, 16));
  c = mk("custom_scale", 1, 65, 65, 2, 2, 32);
  c.scale = 0.37f;
  v.push_back(c);
  return v;
}

std::vector<Case> masks() {
  std::vector<Case> v;
  for (auto [nq, nk] : {std::pair{300, 300}, {65, 300}, {300, 65}, {1, 63}}) {
    auto c = mk("causal_" + std::to_string(nq) + "x" + std::to_string(nk), 2, nq, nk, 2, 2, 32);
    c.causal = true;
    v.push_back(c);
  }
  for (auto [wl, wr] : {std::pair{16, 0}, {8, 8}, {0, 32}, {-1, 5}, {40, -1}}) {
    auto c = mk("window_" + std::to_string(wl) + "_" + std::to_string(wr), 2, 200, 260, 2, 2, 32);
    c.window_left = wl;
    c.window_right = wr;
    v.push_back(c);
  }
  auto c = mk("causal_window_left", 1, 300, 300, 2, 2, 16);
  c.causal = true;
  c.window_left = 50;
  v.push_back(c);
  return v;
}

std::vector<Case> biases() {
  std::vector<Case> v;
  for (auto [kind, name] : {std::pair{BiasKind::full, "full"}, {BiasKind::head_shared, "head_shared"},
                            {BiasKind::batch_only, "batch_only"}, {BiasKind::key_padding, "key_padding"},
                            {BiasKind::neg_inf_rows, "neg_inf_rows"}}) {
    auto c = mk(std::string("bias_") + name, 3, 65, 130, 2, 2, 32);
    c.bias = kind;
    v.push_back(c);
  }
  auto c = mk("swin_343", 8, 343, 343, 3, 3, 16);  // 2 images x 4 windows
  c.bias = BiasKind::swin;
  c.swin_windows = 4;
  v.push_back(c);
  c = mk("swin_small_window", 12, 27, 27, 2, 2, 8);
  c.bias = BiasKind::swin;
  c.swin_windows = 6;
  v.push_back(c);
  c = mk("bias_no_grad", 2, 65, 65, 2, 2, 32);
  c.bias = BiasKind::full;
  c.bias_grad = false;
  v.push_back(c);
  c = mk("alibi_per_head", 2, 100, 120, 4, 4, 32);
  c.alibi = 1;
  v.push_back(c);
  c = mk("alibi_per_batch_head_causal", 2, 100, 100, 4, 4, 32);
  c.alibi = 2;
  c.causal = true;
  v.push_back(c);
  return v;
}

std::vector<Case> structure() {
  std::vector<Case> v;
  v.push_back(mk("gqa_8_2", 2, 130, 130, 8, 2, 32));
  v.push_back(mk("mqa_4_1", 2, 65, 200, 4, 1, 64));
  auto c = mk("varlen", 0, 0, 0, 2, 2, 32);
  c.varlen_q = {1, 65, 300, 7, 0};
  c.varlen_k = {5, 65, 280, 7, 3};
  v.push_back(c);
  c.name = "varlen_causal_gqa_bias";
  c.hq = 4;
  c.hkv = 2;
  c.causal = true;
  c.bias = BiasKind::head_shared;
  v.push_back(c);
  c = mk("padded_strides", 2, 65, 100, 4, 2, 24);
  c.padded_strides = true;
  c.bias = BiasKind::full;
  v.push_back(c);
  c = mk("bhnd_layout", 2, 100, 65, 2, 2, 32);
  c.bhnd_layout = true;
  c.causal = true;
  v.push_back(c);
  c = mk("dlse", 2, 65, 130, 2, 2, 32);
  c.dlse = true;
  v.push_back(c);
  for (float p : {0.1f, 0.5f}) {
    c = mk("dropout_" + std::to_string(p), 2, 130, 70, 2, 2, 32);
    c.dropout = p;
    v.push_back(c);
  }
  c = mk("everything", 0, 0, 0, 4, 2, 40);
  c.varlen_q = {70, 1, 129};
  c.varlen_k = {90, 33, 129};
  c.causal = true;
  c.window_left = 40;
  c.bias = BiasKind::head_shared;
  c.alibi = 1;
  c.dropout = 0.2f;
  c.dlse = true;
  c.padded_strides = true;
  v.push_back(c);
  c = mk("one_thread", 2, 130, 130, 2, 2, 32);
  c.threads = 1;
  c.bias = BiasKind::head_shared;
  v.push_back(c);
  c = mk("many_pairs_whole_sequence_mode", 16, 70, 70, 4, 4, 16);  // B*H >= 4*threads
  c.bias = BiasKind::head_shared;
  c.dropout = 0.1f;
  v.push_back(c);
  for (DType t : {DType::bf16, DType::f16}) {
    c = mk(std::string("lowp_") + attention::dtype_name(t), 2, 130, 65, 4, 2, 64);
    c.dtype = t;
    c.causal = true;
    c.bias = BiasKind::swin;
    c.swin_windows = 2;
    c.nk = 130;
    v.push_back(c);
  }
  return v;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string s = info.param.name;
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Sizes, CpuAttention, ::testing::ValuesIn(sizes()), case_name);
INSTANTIATE_TEST_SUITE_P(Masks, CpuAttention, ::testing::ValuesIn(masks()), case_name);
INSTANTIATE_TEST_SUITE_P(Biases, CpuAttention, ::testing::ValuesIn(biases()), case_name);
INSTANTIATE_TEST_SUITE_P(Structure, CpuAttention, ::testing::ValuesIn(structure()), case_name);

TEST(CpuAttentionProperties, BackwardIsBitwiseRepeatable) {
  Case c = mk("repeat", 2, 200, 200, 4, 2, 32);
  c.bias = BiasKind::head_shared;
  c.dropout = 0.1f;
  Problem pr = make_problem(c);
  attention::forward(pr.p);
  attention::backward(pr.p);
  const auto dq = pr.dq, dk = pr.dk, o = pr.o;
  const auto db = pr.bias_grad[0];
  poison_outputs(pr);
  attention::forward(pr.p);
  attention::backward(pr.p);
  EXPECT_EQ(o, pr.o);
  EXPECT_EQ(dq, pr.dq);
  EXPECT_EQ(dk, pr.dk);
  EXPECT_EQ(db, pr.bias_grad[0]);
}

TEST(CpuAttentionProperties, DropoutKeepsAboutOneMinusP) {
  // With V = 1 everywhere every output element is the kept, rescaled mass of its row.
  Case c = mk("dropout_rate", 1, 256, 512, 2, 2, 8);
  c.dropout = 0.3f;
  Problem pr = make_problem(c);
  float* v = reinterpret_cast<float*>(pr.v.data());
  for (size_t i = 0; i < pr.v.size() / 4; ++i) v[i] = 1.f;
  float* k = reinterpret_cast<float*>(pr.k.data());
  for (size_t i = 0; i < pr.k.size() / 4; ++i) k[i] = 0.f;  // uniform attention
  attention::forward(pr.p);
  const float* o = reinterpret_cast<const float*>(pr.o.data());
  double mean = 0;
  const size_t n = pr.o.size() / 4;
  for (size_t i = 0; i < n; ++i) mean += o[i];
  mean /= double(n);
  EXPECT_NEAR(mean, 1.0, 0.01);  // E[kept/(1-p)] = 1
  // and not all ones: something was dropped
  int ones = 0;
  for (size_t i = 0; i < n; ++i) ones += std::fabs(o[i] - 1.f) < 1e-6f;
  EXPECT_LT(ones, int(n) / 10);
}

TEST(CpuAttentionProperties, MemoryIsLinearInSequenceLength) {
  // N = 16k: an N x N fp32 buffer would be 1 GiB; the whole run must stay far below.
  Case c = mk("memory", 1, 16384, 16384, 1, 1, 16);
  c.causal = true;
  Problem pr = make_problem(c);
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  attention::forward(pr.p);
  attention::backward(pr.p);
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  const double grown_mib = double(after.ru_maxrss - before.ru_maxrss) / 1024.0;
  EXPECT_LT(grown_mib, 64.0) << "peak RSS grew by " << grown_mib << " MiB";
  const float* o = reinterpret_cast<const float*>(pr.o.data());
  for (size_t i = 0; i < pr.o.size() / 4; ++i) ASSERT_FALSE(std::isnan(o[i]));
}

}  // namespace
}  // namespace tessera::test
