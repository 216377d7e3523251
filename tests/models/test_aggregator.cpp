// The long-sequence aggregator: varlen batches equal separate calls, rotary
// encoding depends on relative positions only, causal really hides the
// future, gradients reach every parameter.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <random>

#include "tessera/models/aggregator.h"

namespace {

using namespace tessera::models;

AggregatorConfig small(PositionEncoding pos) {
  AggregatorConfig c;
  c.in_dim = 24;
  c.dim = 32;
  c.depth = 2;
  c.num_heads = 4;
  c.position = pos;
  return c;
}

double rel(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).norm() / b.norm()).item<double>();
}

TEST(Aggregator, VarlenBatchEqualsSeparateSequences) {
  torch::manual_seed(std::random_device{}());
  LongSequenceAggregator m(small(PositionEncoding::rope2d));
  m->eval();
  const std::vector<int64_t> lens = {17, 130, 1};
  auto tokens = torch::randn({148, 24});
  auto pos = torch::randint(0, 50, {148, 2}).to(torch::kFloat);
  auto cu = torch::tensor({0, 17, 147, 148}, torch::kInt);
  auto all = m->forward(tokens, pos, cu);
  ASSERT_EQ(all.pooled.sizes(), (std::vector<int64_t>{3, 32}));
  int64_t start = 0;
  for (size_t b = 0; b < lens.size(); ++b) {
    auto one = m->forward(tokens.narrow(0, start, lens[b]), pos.narrow(0, start, lens[b]));
    EXPECT_LT(rel(all.tokens.narrow(0, start, lens[b]), one.tokens), 1e-5);
    EXPECT_LT(rel(all.pooled[b], one.pooled[0]), 1e-5);
    start += lens[b];
  }
}

TEST(Aggregator, RotaryDependsOnRelativePositionsOnly) {
  torch::manual_seed(std::random_device{}());
  for (auto pe : {PositionEncoding::rope1d, PositionEncoding::rope2d}) {
    LongSequenceAggregator m(small(pe));
    const int64_t P = pe == PositionEncoding::rope2d ? 2 : 1;
    auto tokens = torch::randn({90, 24});
    auto pos = torch::rand({90, P}) * 300;
    auto a = m->forward(tokens, pos).tokens;
    auto b = m->forward(tokens, pos + 1234.5).tokens;  // the whole slide moved, or the video started later
    EXPECT_LT(rel(b, a), 1e-4);
    auto c = m->forward(tokens, pos * 1.5).tokens;     // distances changed: the output must change
    EXPECT_GT(rel(c, a), 1e-3);
  }
}

TEST(Aggregator, CausalIgnoresTheFuture) {
  torch::manual_seed(std::random_device{}());
  auto cfg = small(PositionEncoding::rope1d);
  cfg.causal = true;
  cfg.num_classes = 7;
  LongSequenceAggregator m(cfg);
  auto tokens = torch::randn({60, 24});
  auto t = torch::arange(60).to(torch::kFloat);
  auto a = m->forward(tokens, t);
  auto changed = tokens.clone();
  changed.narrow(0, 40, 20).normal_();
  auto b = m->forward(changed, t);
  EXPECT_LT((a.logits.narrow(0, 0, 40) - b.logits.narrow(0, 0, 40)).abs().max().item<double>(), 1e-5);
  EXPECT_GT((a.logits.narrow(0, 40, 20) - b.logits.narrow(0, 40, 20)).abs().max().item<double>(), 1e-4);
  EXPECT_EQ(a.logits.sizes(), (std::vector<int64_t>{60, 7}));
}

TEST(Aggregator, GradientsReachEveryParameter) {
  LongSequenceAggregator m(small(PositionEncoding::rope2d));
  auto out = m->forward(torch::randn({50, 24}), torch::rand({50, 2}) * 10, torch::tensor({0, 20, 50}, torch::kInt));
  out.pooled.pow(2).sum().backward();
  for (const auto& p : m->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
  }
}

TEST(Aggregator, LongSequenceRuns) {
  // 20k tokens in one sequence: O(N) attention memory keeps this cheap.
  auto cfg = small(PositionEncoding::rope2d);
  cfg.depth = 1;
  LongSequenceAggregator m(cfg);
  torch::NoGradGuard ng;
  auto out = m->forward(torch::randn({20000, 24}), torch::randint(0, 200, {20000, 2}).to(torch::kFloat));
  EXPECT_EQ(out.tokens.sizes(), (std::vector<int64_t>{20000, 32}));
  EXPECT_FALSE(torch::isnan(out.pooled).any().item<bool>());
}

TEST(Aggregator, BadInputsAreRejected) {
  LongSequenceAggregator m(small(PositionEncoding::rope2d));
  EXPECT_THROW(m->forward(torch::randn({10, 23}), torch::rand({10, 2})), std::invalid_argument);
  EXPECT_THROW(m->forward(torch::randn({10, 24}), torch::rand({10, 1})), std::invalid_argument);
  EXPECT_THROW(m->forward(torch::randn({10, 24}), torch::rand({10, 2}), torch::tensor({0, 9}, torch::kInt)),
               std::invalid_argument);
  auto bad = small(PositionEncoding::rope2d);
  bad.num_heads = 5;
  EXPECT_THROW(LongSequenceAggregator{bad}, std::invalid_argument);
  EXPECT_THROW(parse_position_encoding("learned3d"), std::invalid_argument);
}

}  // namespace

namespace {

TEST(Aggregator, SavesAndLoadsWithItsConfig) {
  auto cfg = small(PositionEncoding::rope1d);
  cfg.num_classes = 3;
  cfg.causal = true;
  LongSequenceAggregator m(cfg);
  const std::string path = ::testing::TempDir() + "/agg.safetensors";
  save_aggregator(path, m);
  auto loaded = load_aggregator(path);
  EXPECT_EQ(loaded->config().num_classes, 3);
  EXPECT_TRUE(loaded->config().causal);
  auto x = torch::randn({12, 24});
  auto t = torch::arange(12).to(torch::kFloat);
  EXPECT_TRUE(torch::equal(m->forward(x, t).logits, loaded->forward(x, t).logits));
}

}  // namespace
