// One pathology encoder against its fixture (tests/models/fixtures/encoders/
// <name>.safetensors, made by scripts/fixtures/make_encoder_fixtures.py):
// the model at the fixture's depth, weights from the counter generator under
// the reference's own key names, loaded through adapt_vit_checkpoint; then
// forward_features rows and the tile embedding at each stored input size, from forward_head and from
// forward_embedding.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "counter_weights.h"
#include "encoder_configs.h"
#include "fixtures.h"
#include "tessera/models/safetensors.h"
#include "tessera/models/state_dict.h"
#include "tessera/models/vit.h"
#include "tessera/models/vit_weights.h"

namespace tessera::models::testing {

inline std::string encoder_fixture(const std::string& name) {
  return std::string(TESSERA_ENCODER_FIXTURES) + "/" + name + ".safetensors";
}

// (key, shape) pairs from a JSON list [[key, [dims...]], ...].
inline std::vector<std::pair<std::string, std::vector<int64_t>>> key_shapes(const nlohmann::json& j) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const auto& e : j) out.emplace_back(e.at(0).get<std::string>(), e.at(1).get<std::vector<int64_t>>());
  return out;
}

// Floating parameters to (device, dtype).
inline void move_model(torch::nn::Module& m, torch::Device device, torch::ScalarType dtype) {
  m.to(device);
  torch::NoGradGuard ng;
  for (auto& p : m.parameters()) p.set_data(p.to(dtype));
}

inline void check_encoder_fixture(const std::string& name, torch::Device device, torch::ScalarType dtype, double tol) {
  const auto path = encoder_fixture(name);
  // Committed with the tests (scripts/fixtures/make_encoder_fixtures.py regenerates them).
  ASSERT_TRUE(std::filesystem::exists(path)) << "fixture " << path << " is missing";
  const auto meta = safetensors::metadata(path);
  const auto ref = safetensors::load(path);
  ViTConfig c = encoder_config(name);
  c.depth = std::stoll(meta.at("depth"));
  VisionTransformer model(c);
  const auto report = load_state_dict(*model, adapt_vit_checkpoint(counter_state_dict(key_shapes(nlohmann::json::parse(meta.at("keys")))), *model));
  ASSERT_TRUE(report.complete()) << report.summary();
  model->eval();
  move_model(*model, device, dtype);
  torch::NoGradGuard ng;
  int sizes = 0;
  for (int64_t size : {224, 448}) {
    const std::string s = std::to_string(size);
    if (!ref.count("features_" + s)) continue;
    ++sizes;
    const auto features = model->forward_features(counter_image("input_" + s, size).to(device, dtype));
    const auto rows = ref.at("rows_" + s);
    ASSERT_LT(rows.max().item<int64_t>(), features.size(1)) << name << " at " << size;
    const double ef = rel_error(features[0].index_select(0, rows.to(device)).cpu(), ref.at("features_" + s));
    const auto embedding = model->forward_head(features, /*pre_logits=*/true);
    ASSERT_EQ(embedding.sizes(), ref.at("embedding_" + s).sizes()) << name << " at " << size;
    const double ee = rel_error(embedding.cpu(), ref.at("embedding_" + s));
    // What embed-wsi runs: the embedding alone (the last block for the class token only, where it pools that).
    const auto direct = model->forward_embedding(counter_image("input_" + s, size).to(device, dtype));
    ASSERT_EQ(direct.sizes(), ref.at("embedding_" + s).sizes()) << name << " at " << size;
    const double ed = rel_error(direct.cpu(), ref.at("embedding_" + s));
    std::cout << name << " " << s << " px on " << device << " " << dtype << ": features rel err " << ef << ", embedding "
              << ee << ", forward_embedding " << ed << "\n";
    EXPECT_LT(ef, tol) << name << " at " << size;
    EXPECT_LT(ee, tol) << name << " at " << size;
    EXPECT_LT(ed, tol) << name << " at " << size;
  }
  EXPECT_GT(sizes, 0) << path << " holds no features";
}

}  // namespace tessera::models::testing
