// Hugging Face VideoMAE model folders as downloaded. Equivalence: each fixture
// (tests/models/fixtures/video/<name>.safetensors, made by
// scripts/fixtures/make_video_fixtures.py with transformers in float64) holds
// the config.json transformers wrote and the state-dict keys; the test writes
// that config.json and counter-generated weights under those keys as
// model.safetensors into a temporary folder and loads it the way `tessera
// video --model DIR` does. Bad folders: one error naming the file.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fixtures.h"
#include "videomae_hf_fixture.h"
#include "tessera/models/safetensors.h"
#include "tessera/models/state_dict.h"
#include "tessera/models/videomae_hf.h"

namespace {

namespace fs = std::filesystem;
using namespace tessera::models;
using namespace tessera::models::testing;

std::string expect_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

class VideoMAEHfFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(VideoMAEHfFixture, FolderMatchesTransformers) { check_videomae_hf_fixture(GetParam(), torch::kCPU, torch::kFloat, 1e-4); }

INSTANTIATE_TEST_SUITE_P(Transformers, VideoMAEHfFixture, ::testing::ValuesIn(videomae_hf_fixture_names()));

// A classification folder of videomae_small_config()'s sizes, in the layout transformers saves.
struct SmallFolder : TempFolder {
  nlohmann::json config = {{"model_type", "videomae"}, {"architectures", {"VideoMAEForVideoClassification"}},
                           {"hidden_size", 24}, {"num_hidden_layers", 1}, {"num_attention_heads", 2},
                           {"intermediate_size", 48}, {"image_size", 32}, {"num_frames", 4},
                           {"id2label", {{"1", "cut"}, {"0", "dissect"}}}};
  explicit SmallFolder(const std::string& name) : TempFolder(name) {}
  void save(const StateDict& weights) const { safetensors::save((dir / "model.safetensors").string(), weights); }
  void save_config() const { write("config.json", config.dump()); }
};

TEST(VideoMAEHfFolder, ClassificationFolderRoundTripsWithLegacyBiasKeys) {
  SmallFolder folder("roundtrip");
  folder.save_config();
  VideoMAEVideoEncoder source(videomae_small_config(), 2);
  StateDict legacy;  // transformers' q_bias / v_bias parameters, no key bias
  for (const auto& [k, t] : state_dict(*source)) {
    const auto at = k.find("attention.attention.");
    if (at != std::string::npos && k.compare(k.size() - 5, 5, ".bias") == 0) {
      const std::string which = k.substr(at + 20, k.size() - at - 25);
      if (which != "key") legacy[k.substr(0, at + 20) + which.substr(0, 1) + "_bias"] = t;
      continue;
    }
    legacy[k] = t;
  }
  folder.save(legacy);
  const HfVideoMAEFolder f = read_hf_videomae_folder(folder.dir.string());
  ASSERT_TRUE(f.classification);
  EXPECT_EQ(f.labels, (std::vector<std::string>{"dissect", "cut"}));
  EXPECT_EQ(f.config.hidden_size, 24);
  EXPECT_EQ(f.config.patch_size, 16);  // transformers' default for a key config.json leaves out
  auto loaded = load_hf_videomae(f);
  torch::NoGradGuard ng;
  const auto x = torch::randn({1, 4, 3, 32, 32});
  const auto a = loaded->forward(x), b = source->forward(x);
  EXPECT_LT(rel_error(a.logits, b.logits), 1e-5);
  // HF's head: fc_norm (PyTorch's default eps) over the mean token, then the classifier.
  const auto pooled = torch::layer_norm(b.last_hidden_state.mean(1), {24}, source->fc_norm->weight, source->fc_norm->bias, 1e-5);
  EXPECT_LT(rel_error(a.pooled, pooled), 1e-5);
}

TEST(VideoMAEHfFolder, BadFoldersNameTheFile) {
  SmallFolder folder("bad");
  std::string e = expect_error([&] { read_hf_videomae_folder(folder.dir.string()); });
  EXPECT_NE(e.find("config.json: missing"), std::string::npos) << e;

  folder.write("config.json", "{ not json");
  e = expect_error([&] { read_hf_videomae_folder(folder.dir.string()); });
  EXPECT_NE(e.find("config.json: not valid JSON"), std::string::npos) << e;

  folder.config["model_type"] = "vit";
  folder.save_config();
  e = expect_error([&] { read_hf_videomae_folder(folder.dir.string()); });
  EXPECT_NE(e.find("config.json: model_type 'vit' is not supported"), std::string::npos) << e;

  folder.config["model_type"] = "videomae";
  folder.config["architectures"] = {"VideoMAEForSegmentation"};
  folder.save_config();
  e = expect_error([&] { read_hf_videomae_folder(folder.dir.string()); });
  EXPECT_NE(e.find("architecture VideoMAEForSegmentation is not supported"), std::string::npos) << e;

  folder.config["architectures"] = {"VideoMAEForVideoClassification"};
  folder.config["hidden_act"] = "mish";
  folder.save_config();
  e = expect_error([&] { read_hf_videomae_folder(folder.dir.string()); });
  EXPECT_NE(e.find("config.json: VideoMAE config: hidden_act 'mish'"), std::string::npos) << e;

  folder.config.erase("hidden_act");
  folder.config["hidden_size"] = "24";
  folder.save_config();
  e = expect_error([&] { read_hf_videomae_folder(folder.dir.string()); });
  EXPECT_NE(e.find("config.json: hidden_size must be an integer"), std::string::npos) << e;

  folder.config["hidden_size"] = 24;
  folder.config["id2label"] = {{"0", "a"}, {"2", "b"}};
  folder.save_config();
  e = expect_error([&] { read_hf_videomae_folder(folder.dir.string()); });
  EXPECT_NE(e.find("config.json: id2label"), std::string::npos) << e;

  folder.config["id2label"] = {{"0", "a"}, {"1", "b"}};
  folder.save_config();
  e = expect_error([&] { read_hf_videomae_folder(folder.dir.string()); });
  EXPECT_NE(e.find("no weights"), std::string::npos) << e;
  EXPECT_NE(e.find(folder.dir.string()), std::string::npos) << e;

  // Weights of a narrower model than config.json says.
  VideoMAEConfig narrow = videomae_small_config();
  narrow.hidden_size = 16;
  folder.save(state_dict(*VideoMAEVideoEncoder(narrow, 2)));
  const HfVideoMAEFolder f = read_hf_videomae_folder(folder.dir.string());
  e = expect_error([&] { load_hf_videomae(f); });
  EXPECT_NE(e.find("model.safetensors: does not fit"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(VideoMAEHfFolder, BareAndPretrainingLayoutsLoadTheEncoder) {
  SmallFolder folder("layouts");
  folder.config["architectures"] = {"VideoMAEModel"};
  folder.config["use_mean_pooling"] = false;
  folder.save_config();
  VideoMAEConfig c = videomae_small_config();
  c.use_mean_pooling = false;
  VideoMAEModel source(c);
  folder.save(state_dict(*source));  // VideoMAEModel.save_pretrained: no prefix
  HfVideoMAEFolder f = read_hf_videomae_folder(folder.dir.string());
  ASSERT_FALSE(f.classification);
  ASSERT_TRUE(f.config.use_mean_pooling == false);
  torch::NoGradGuard ng;
  const auto x = torch::randn({1, 4, 3, 32, 32});
  const auto expected = source->forward(x);
  EXPECT_LT(rel_error(load_hf_videomae(f)->forward(x).last_hidden_state, expected), 1e-6);

  folder.config["architectures"] = {"VideoMAEForPreTraining"};
  folder.save_config();
  StateDict pretraining;
  for (const auto& [k, t] : state_dict(*source)) pretraining["videomae." + k] = t;
  pretraining["decoder.norm.weight"] = torch::ones({8});  // the decoder is not the encoder's: left behind
  pretraining["mask_token"] = torch::zeros({1, 1, 8});
  folder.save(pretraining);
  f = read_hf_videomae_folder(folder.dir.string());
  const auto out = load_hf_videomae(f)->forward(x);
  EXPECT_LT(rel_error(out.last_hidden_state, expected), 1e-6);
  EXPECT_LT(rel_error(out.pooled, expected.mean(1)), 1e-6);
}

}  // namespace
