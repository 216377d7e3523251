// One Hugging Face VideoMAE fixture (tests/models/fixtures/video/<name>.safetensors,
// made by scripts/fixtures/make_video_fixtures.py): config.json as transformers
// wrote it and counter-generated weights under the state-dict keys it recorded
// go into a temporary folder, which loads the way `tessera video --model DIR`
// loads it; last_hidden_state rows, the pooled embedding and the logits must
// match the float64 reference within `tol`.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "counter_weights.h"
#include "fixtures.h"
#include "tessera/models/safetensors.h"
#include "tessera/models/videomae_hf.h"

namespace tessera::models::testing {

inline std::vector<std::string> videomae_hf_fixture_names() {
  return {"videomae_base_pretraining", "videomae_base_model", "videomae_base_kinetics", "videomae_large_ssv2",
          "videomae_base_token_head"};
}

// A fresh folder under the system temp dir, removed with the object.
struct TempFolder {
  std::filesystem::path dir;
  explicit TempFolder(const std::string& name)
      : dir(std::filesystem::temp_directory_path() / ("tessera_videomae_hf_" + name)) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~TempFolder() { std::filesystem::remove_all(dir); }
  std::string write(const std::string& file, const std::string& text) const {
    std::ofstream((dir / file).string()) << text;
    return (dir / file).string();
  }
};

inline void check_videomae_hf_fixture(const std::string& name, torch::Device device, torch::ScalarType dtype, double tol) {
  const std::string path = std::string(TESSERA_VIDEO_FIXTURES) + "/" + name + ".safetensors";
  // Committed with the tests (scripts/fixtures/make_video_fixtures.py regenerates them).
  ASSERT_TRUE(std::filesystem::exists(path)) << "fixture " << path << " is missing";
  const auto meta = safetensors::metadata(path);
  const auto ref = safetensors::load(path);
  TempFolder folder(name);
  folder.write("config.json", meta.at("config_json"));
  StateDict weights;
  for (const auto& e : nlohmann::json::parse(meta.at("keys")))
    weights.emplace(e.at(0).get<std::string>(), counter_tensor(e.at(0).get<std::string>(), e.at(1).get<std::vector<int64_t>>()));
  safetensors::save((folder.dir / "model.safetensors").string(), weights);

  const HfVideoMAEFolder f = read_hf_videomae_folder(folder.dir.string());
  EXPECT_EQ(f.architecture, meta.at("architecture"));
  auto model = load_hf_videomae(f, device, dtype);  // built on the device, the file read onto it, as `video` loads it
  const auto& c = f.config;
  const auto clip = counter_tensor("video_input", {1, c.num_frames, c.num_channels, c.image_size, c.image_size}, 0.0, 2.0);
  torch::NoGradGuard ng;
  const auto out = model->forward(clip.to(device, dtype));
  const auto rows = ref.at("rows");
  const double eh = rel_error(out.last_hidden_state[0].index_select(0, rows.to(device)).cpu(), ref.at("hidden_rows"));
  const double ep = rel_error(out.pooled.cpu(), ref.at("pooled"));
  std::cout << name << " (" << f.architecture << ", transformers " << meta.at("transformers") << ") on " << device << " "
            << dtype << ": hidden rel err " << eh << ", pooled " << ep;
  EXPECT_LT(eh, tol) << name;
  EXPECT_LT(ep, tol) << name;
  if (ref.count("logits")) {
    ASSERT_TRUE(out.logits.defined()) << name;
    ASSERT_EQ(out.logits.sizes(), ref.at("logits").sizes()) << name;
    const double el = rel_error(out.logits.cpu(), ref.at("logits"));
    std::cout << ", logits " << el;
    EXPECT_LT(el, tol) << name;
    EXPECT_EQ(int64_t(f.labels.size()), out.logits.size(1)) << name;
  } else {
    EXPECT_FALSE(out.logits.defined()) << name;
  }
  std::cout << "\n";
}

}  // namespace tessera::models::testing
