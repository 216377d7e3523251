// Hugging Face VideoMAEModel equivalence: the videomae_tiny_hf fixture
// (transformers 5.17, float64 reference) loaded by its original key names must
// reproduce last_hidden_state for a 16-frame 224x224 clip (1568 tubelets).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "fixtures.h"
#include "tessera/models/config.h"
#include "tessera/models/state_dict.h"
#include "tessera/models/videomae.h"

namespace {

using namespace tessera::models;
using namespace tessera::models::testing;

TEST(VideoMAE, TinyHfFixture) {
  TESSERA_REQUIRE_FIXTURE("videomae_tiny_hf.safetensors");
  TESSERA_REQUIRE_FIXTURE("videomae_tiny_hf_input.safetensors");
  const auto file = safetensors::load(fixture("videomae_tiny_hf.safetensors"));
  const auto input = safetensors::load(fixture("videomae_tiny_hf_input.safetensors")).at("input");
  VideoMAEModel model(videomae_tiny_hf_config());
  model->eval();
  const auto report = load_state_dict(*model, remap_keys(file, {"weights.", {}, {}}));
  EXPECT_TRUE(report.complete()) << report.summary();

  torch::NoGradGuard no_grad;
  const auto out = model->forward(input);
  ASSERT_EQ(out.sizes(), file.at("output").sizes());
  const double e = rel_error(out, file.at("output"));
  std::cout << "videomae_tiny_hf: last_hidden_state rel err " << e << "\n";
  EXPECT_LT(e, 1e-4);
}

TEST(VideoMAE, SinusoidTableMatchesTheClosedForm) {
  const auto t = get_sinusoid_encoding_table(10, 6);
  ASSERT_EQ(t.sizes(), (std::vector<int64_t>{1, 10, 6}));
  // pos 3: j=0 sin(3), j=1 cos(3), j=2 sin(3/10000^(2/6)), j=5 cos(3/10000^(4/6)).
  EXPECT_FLOAT_EQ(t[0][3][0].item<float>(), std::sin(3.0f));
  EXPECT_FLOAT_EQ(t[0][3][1].item<float>(), std::cos(3.0f));
  EXPECT_FLOAT_EQ(t[0][3][2].item<float>(), static_cast<float>(std::sin(3.0 / std::pow(10000.0, 2.0 / 6))));
  EXPECT_FLOAT_EQ(t[0][3][5].item<float>(), static_cast<float>(std::cos(3.0 / std::pow(10000.0, 4.0 / 6))));
}

TEST(VideoMAE, LegacyQVBiasKeysLoadAsTheSameFunction) {
  const VideoMAEConfig c = videomae_small_config();
  VideoMAEModel model(c);
  auto sd = state_dict(*model);
  StateDict legacy;
  for (const auto& [k, t] : sd) {
    const auto pos = k.find("attention.attention.");
    if (pos != std::string::npos && k.size() > 5 && k.compare(k.size() - 5, 5, ".bias") == 0) {
      const std::string which = k.substr(pos + 20, k.size() - pos - 25);  // query / key / value
      if (which == "query") legacy[k.substr(0, pos + 20) + "q_bias"] = t;
      if (which == "value") legacy[k.substr(0, pos + 20) + "v_bias"] = t;
      continue;  // legacy files have no key bias
    }
    legacy[k] = t;
  }
  VideoMAEModel other(c);
  load_state_dict(*other, videomae_from_legacy_bias_keys(legacy));
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({1, 4, 3, 32, 32});
  // The key bias only shifts every score of a query by the same amount: softmax ignores it.
  EXPECT_LT(rel_error(other->forward(x), model->forward(x)), 1e-5);
}

}  // namespace
