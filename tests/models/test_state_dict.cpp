// Loading a StateDict into a module by name: key mapping, and missing /
// unexpected / mis-shaped keys reported by name.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tessera/models/state_dict.h"

namespace {

using namespace tessera::models;

// Two levels of names plus an int64 buffer, like Swin's relative_position_index.
struct Inner : torch::nn::Module {
  Inner() {
    linear1 = register_module("linear1", torch::nn::Linear(3, 2));
    index = register_buffer("index", torch::zeros({2, 2}, torch::kLong));
  }
  torch::nn::Linear linear1{nullptr};
  torch::Tensor index;
};

struct Outer : torch::nn::Module {
  Outer() {
    inner = register_module("inner", std::make_shared<Inner>());
    scale = register_parameter("scale", torch::ones({2}));
  }
  std::shared_ptr<Inner> inner;
  torch::Tensor scale;
};

StateDict checkpoint() {
  return {{"weights.inner.fc1.weight", torch::full({2, 3}, 2.0)},
          {"weights.inner.fc1.bias", torch::full({2}, 3.0)},
          {"weights.inner.index", torch::tensor({0.0f, 1.0f, 2.0f, 3.0f}).view({2, 2})},
          {"weights.scale", torch::full({2}, 4.0)},
          {"output", torch::zeros({1})}};
}

TEST(StateDict, RemapsPrefixAndRenamesAtComponentBoundaries) {
  const auto m = remap_keys(checkpoint(), {"weights.", {{"fc1", "linear1"}}, {}});
  EXPECT_EQ(m.size(), 4u);  // "output" lacks the prefix
  EXPECT_TRUE(m.count("inner.linear1.weight"));
  EXPECT_TRUE(m.count("scale"));
  // "xfc1" is not a component named fc1.
  const auto n = remap_keys({{"a.xfc1.w", torch::zeros({1})}}, {"", {{"fc1", "linear1"}}, {}});
  EXPECT_TRUE(n.count("a.xfc1.w"));
}

TEST(StateDict, LoadsEveryEntryAndConvertsDtypes) {
  Outer model;
  const auto r = load_state_dict(model, remap_keys(checkpoint(), {"weights.", {{"fc1", "linear1"}}, {}}));
  EXPECT_TRUE(r.complete()) << r.summary();
  EXPECT_EQ(r.loaded, 4u);
  EXPECT_TRUE(torch::equal(model.inner->linear1->weight, torch::full({2, 3}, 2.0)));
  EXPECT_EQ(model.inner->index.scalar_type(), torch::kLong);
  EXPECT_TRUE(torch::equal(model.inner->index, torch::arange(4).view({2, 2})));
}

TEST(StateDict, ReportsMissingAndUnexpectedByName) {
  Outer model;
  auto sd = remap_keys(checkpoint(), {"weights.", {}, {}});  // fc1 not renamed
  try {
    load_state_dict(model, sd, /*strict=*/true);
    ADD_FAILURE() << "strict load accepted missing keys";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("missing 2: inner.linear1.bias, inner.linear1.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unexpected 2: inner.fc1.bias, inner.fc1.weight"), std::string::npos) << msg;
  }
  const auto r = load_state_dict(model, sd, /*strict=*/false);
  EXPECT_EQ(r.loaded, 2u);
  EXPECT_EQ(r.missing, (std::vector<std::string>{"inner.linear1.bias", "inner.linear1.weight"}));
  EXPECT_EQ(r.unexpected, (std::vector<std::string>{"inner.fc1.bias", "inner.fc1.weight"}));
}

TEST(StateDict, ShapeMismatchThrowsNamingTheKeyEvenWhenNotStrict) {
  Outer model;
  StateDict sd{{"scale", torch::ones({3})}};
  try {
    load_state_dict(model, sd, /*strict=*/false);
    ADD_FAILURE() << "shape mismatch accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("scale (file [3], model [2])"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(torch::equal(model.scale, torch::ones({2})));  // nothing copied
}

TEST(StateDict, OwnStateDictListsParametersAndBuffers) {
  Outer model;
  const auto s = state_dict(model);
  EXPECT_EQ(s.size(), 4u);
  EXPECT_TRUE(s.count("inner.index"));
}

}  // namespace
