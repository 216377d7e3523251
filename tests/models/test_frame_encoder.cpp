// The per-frame encoder of `tessera video --frame-model configs/vit_b16.yaml`
// against timm: the frame_vit_b16 fixture (scripts/fixtures/make_video_fixtures.py,
// timm vit_base_patch16_224 cut to the fixture's depth, counter-generated
// weights, float64) loaded from a safetensors file of timm's key names the way
// the CLI loads --weights; forward_features rows and the pooled embedding of a
// counter-generated frame within 1e-4.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "counter_weights.h"
#include "fixtures.h"
#include "tessera/models/config.h"
#include "tessera/models/safetensors.h"
#include "tessera/models/state_dict.h"
#include "tessera/models/vit.h"
#include "videomae_hf_fixture.h"

namespace {

using namespace tessera::models;
using namespace tessera::models::testing;

TEST(FrameEncoder, TimmViTB16MatchesFixture) {
  const std::string path = std::string(TESSERA_VIDEO_FIXTURES) + "/frame_vit_b16.safetensors";
  ASSERT_TRUE(std::filesystem::exists(path)) << "fixture " << path << " is missing";
  const auto meta = safetensors::metadata(path);
  const auto ref = safetensors::load(path);
  ViTConfig c;  // timm vit_base_patch16_224, cut to the fixture's depth
  c.img_size = 224;
  c.patch_size = 16;
  c.embed_dim = 768;
  c.num_heads = 12;
  c.mlp_ratio = 4.0;
  c.num_classes = 0;
  c.depth = std::stoll(meta.at("depth"));
  StateDict weights;
  for (const auto& e : nlohmann::json::parse(meta.at("keys")))
    weights.emplace(e.at(0).get<std::string>(), counter_tensor(e.at(0).get<std::string>(), e.at(1).get<std::vector<int64_t>>()));
  TempFolder folder("frame_vit_b16");
  const std::string file = (folder.dir / "vit_b16.safetensors").string();
  safetensors::save(file, weights);
  VisionTransformer model(c);
  const auto report = load_weights(*model, {file});  // as --frame-model ... --weights FILE --weights-prefix ''
  ASSERT_TRUE(report.complete()) << report.summary();
  model->eval();
  torch::NoGradGuard ng;
  const auto features = model->forward_features(counter_image("frame_input_224", 224));
  const double ef = rel_error(features[0].index_select(0, ref.at("rows")), ref.at("feature_rows"));
  const double ee = rel_error(model->forward_head(features, /*pre_logits=*/true), ref.at("embedding"));
  std::cout << "frame_vit_b16 (timm " << meta.at("timm") << "): features rel err " << ef << ", embedding " << ee << "\n";
  EXPECT_LT(ef, 1e-4);
  EXPECT_LT(ee, 1e-4);
}

}  // namespace
