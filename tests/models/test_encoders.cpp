// The pathology tile encoders (UNI, UNI2-h, Virchow2, H-optimus-0,
// Prov-GigaPath's tile encoder, Phikon-v2) as options of the one ViT:
// configs/<name>.yaml against the model cards' arguments, state-dict keys and
// shapes against timm's / transformers' full-depth ones, and fp32 outputs
// against the float64 references of make_encoder_fixtures.py (≤ 1e-4).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "counter_weights.h"
#include "encoder_configs.h"
#include "encoder_fixture.h"
#include "fixtures.h"
#include "tessera/models/config.h"
#include "tessera/models/state_dict.h"
#include "tessera/models/vit.h"
#include "tessera/models/vit_weights.h"

namespace {

using namespace tessera::models;
using namespace tessera::models::testing;
namespace fs = std::filesystem;

TEST(CounterWeights, CppGeneratorIsBitIdenticalToNumpy) {
  // Debian's python3 (setup.sh installs python3-numpy), else the one on PATH (the GPU image's has numpy there).
  std::string python;
  for (const char* p : {"/usr/bin/python3", "python3"})
    if (std::system((std::string(p) + " -c 'import numpy' >/dev/null 2>&1").c_str()) == 0) {
      python = p;
      break;
    }
  ASSERT_FALSE(python.empty()) << "no python3 here imports numpy (scripts/setup.sh installs python3-numpy)";
  const auto file = fs::temp_directory_path() / ("tessera_counter_" + std::to_string(::getpid()) + ".f32");
  const std::string cmd = python + " " + TESSERA_SCRIPTS + "/fixtures/counter_weights.py " + file.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(file, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  fs::remove(file);
  const auto mine = torch::cat({counter_tensor("blocks.0.attn.qkv.weight", {1000}), counter_tensor("blocks.0.ls1.gamma", {17}),
                                counter_tensor("norm.weight", {33}), counter_tensor("norm.bias", {5}),
                                counter_tensor("pos_embed", {1, 3, 7}).flatten(), counter_image("input_224", 4).flatten()});
  ASSERT_EQ(bytes.size(), static_cast<size_t>(mine.numel()) * 4);
  EXPECT_EQ(std::memcmp(bytes.data(), mine.data_ptr<float>(), bytes.size()), 0);
  // The rule's ranges: LayerScale in [0.25, 0.75), LayerNorm weights near 1.
  EXPECT_GE(counter_tensor("blocks.0.ls1.gamma", {17}).min().item<float>(), 0.25f);
  EXPECT_GE(counter_tensor("norm.weight", {33}).min().item<float>(), 0.875f);
}

class EncoderFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(EncoderFixture, Fp32MatchesReference) { check_encoder_fixture(GetParam(), torch::kCPU, torch::kFloat, 1e-4); }

TEST_P(EncoderFixture, ConfigFileSaysWhatTheCardSays) {
  TESSERA_REQUIRE_YAML();
  const ViTConfig want = encoder_config(GetParam());
  const ViTConfig got = load_vit_config(config_file(GetParam() + ".yaml"));
  EXPECT_EQ(got.img_size, want.img_size);
  EXPECT_EQ(got.patch_size, want.patch_size);
  EXPECT_EQ(got.embed_dim, want.embed_dim);
  EXPECT_EQ(got.depth, want.depth);
  EXPECT_EQ(got.num_heads, want.num_heads);
  EXPECT_EQ(static_cast<int64_t>(got.embed_dim * got.mlp_ratio), static_cast<int64_t>(want.embed_dim * want.mlp_ratio));
  EXPECT_EQ(got.mlp_layer, want.mlp_layer);
  EXPECT_EQ(got.act_layer, want.act_layer);
  EXPECT_EQ(got.init_values, want.init_values);
  EXPECT_EQ(got.class_token, want.class_token);
  EXPECT_EQ(got.reg_tokens, want.reg_tokens);
  EXPECT_EQ(got.no_embed_class, want.no_embed_class);
  EXPECT_EQ(got.fc_norm, want.fc_norm);
  EXPECT_EQ(got.global_pool, want.global_pool);
  EXPECT_EQ(got.dynamic_img_size, want.dynamic_img_size);
  EXPECT_EQ(got.num_classes, 0);
  EXPECT_EQ(got.norm_eps, want.norm_eps);
  EXPECT_EQ(got.reference, want.reference);
  EXPECT_EQ(got.preprocess.target_mpp, want.preprocess.target_mpp);
  EXPECT_EQ(got.preprocess.tile_size, want.preprocess.tile_size);
  EXPECT_EQ(got.preprocess.crop, want.preprocess.crop);
  EXPECT_EQ(got.preprocess.mean, want.preprocess.mean);
  EXPECT_EQ(got.preprocess.std, want.preprocess.std);
}

// The model at depth 2 has every non-block key of the full-depth reference with
// its shape, and blocks 0 and 1 those of each of the reference's blocks (all
// alike): with the reference's keys converted as the loader converts them.
TEST_P(EncoderFixture, KeysAndShapesMatchTheFullDepthReference) {
  const auto path = std::string(TESSERA_ENCODER_FIXTURES) + "/full_keys.json";
  ASSERT_TRUE(fs::exists(path)) << "fixture " << path << " is missing";
  const auto all = nlohmann::json::parse(std::ifstream(path));
  ASSERT_TRUE(all.at("models").contains(GetParam()));
  ViTConfig c = encoder_config(GetParam());
  const int64_t depth = c.depth;
  StateDict ref;  // shapes only: meta tensors allocate nothing
  for (const auto& [k, shape] : key_shapes(all.at("models").at(GetParam())))
    ref.emplace(k, torch::empty(shape, torch::TensorOptions().device(torch::kMeta)));
  c.depth = 2;
  VisionTransformer model(c);
  const StateDict converted = adapt_vit_checkpoint(ref, *model);
  const StateDict own = state_dict(*model);
  std::set<int64_t> blocks;
  for (const auto& [k, t] : converted) {
    std::string key = k;
    if (key.rfind("blocks.", 0) == 0) {
      const auto dot = key.find('.', 7);
      blocks.insert(std::stoll(key.substr(7, dot - 7)));
      key = "blocks.0" + key.substr(dot);  // every block is built alike
    }
    ASSERT_TRUE(own.count(key)) << GetParam() << ": reference key " << k << " has no place in the model";
    EXPECT_EQ(own.at(key).sizes(), t.sizes()) << GetParam() << ": " << k;
  }
  EXPECT_EQ(static_cast<int64_t>(blocks.size()), depth);
  EXPECT_EQ(*blocks.rbegin(), depth - 1);
  for (const auto& [k, t] : own) {
    if (k.rfind("blocks.", 0) == 0) continue;
    EXPECT_TRUE(converted.count(k)) << GetParam() << ": model key " << k << " is not in the reference";
  }
  for (const auto& [k, t] : own)
    if (k.rfind("blocks.0.", 0) == 0) EXPECT_TRUE(converted.count(k)) << GetParam() << ": model key " << k << " is not in the reference";
}

INSTANTIATE_TEST_SUITE_P(Encoders, EncoderFixture, ::testing::ValuesIn(encoder_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// Shapes the model cards imply, checked without any fixture (depth 1: the blocks are alike).
TEST(Encoders, StateDictShapesOfTheCards) {
  struct Want { std::string name, key; std::vector<int64_t> shape; };
  const std::vector<Want> wants = {
      {"uni", "pos_embed", {1, 197, 1024}},           {"uni", "blocks.0.mlp.fc1.weight", {4096, 1024}},
      {"uni2_h", "pos_embed", {1, 256, 1536}},        {"uni2_h", "reg_token", {1, 8, 1536}},
      {"uni2_h", "blocks.0.mlp.fc1.weight", {8192, 1536}}, {"uni2_h", "blocks.0.mlp.fc2.weight", {1536, 4096}},
      {"virchow2", "pos_embed", {1, 261, 1280}},      {"virchow2", "blocks.0.mlp.fc1.weight", {6832, 1280}},
      {"virchow2", "blocks.0.mlp.fc2.weight", {1280, 3416}}, {"virchow2", "blocks.0.attn.qkv.weight", {3840, 1280}},
      {"h_optimus_0", "pos_embed", {1, 256, 1536}},   {"h_optimus_0", "reg_token", {1, 4, 1536}},
      {"gigapath_tile", "pos_embed", {1, 197, 1536}}, {"gigapath_tile", "patch_embed.proj.weight", {1536, 3, 16, 16}},
      {"phikon_v2", "pos_embed", {1, 197, 1024}},     {"phikon_v2", "blocks.0.ls1.gamma", {1024}},
  };
  for (const auto& w : wants) {
    ViTConfig c = encoder_config(w.name);
    c.depth = 1;
    VisionTransformer m(c);
    const auto sd = state_dict(*m);
    ASSERT_TRUE(sd.count(w.key)) << w.name << " " << w.key;
    EXPECT_EQ(sd.at(w.key).sizes(), w.shape) << w.name << " " << w.key;
  }
  ViTConfig v = encoder_config("virchow2");
  v.depth = 1;
  EXPECT_EQ(VisionTransformer(v)->pooled_dim(), 2560);
}

ViTConfig small(const std::string& name) {
  ViTConfig c = encoder_config(name);
  c.embed_dim = 48;
  c.num_heads = 3;
  c.depth = 1;
  c.img_size = c.patch_size * 4;
  return c;
}

TEST(Encoders, TokenPlusAvgIsClassTokenThenMeanOfPatchTokens) {
  VisionTransformer m(small("virchow2"));  // 4 registers
  const auto f = torch::randn({2, 1 + 4 + 16, 48});
  const auto pooled = m->forward_head(f, true);
  ASSERT_EQ(pooled.sizes(), (std::vector<int64_t>{2, 96}));
  EXPECT_TRUE(torch::equal(pooled.narrow(1, 0, 48), f.select(1, 0)));
  EXPECT_TRUE(torch::allclose(pooled.narrow(1, 48, 48), f.narrow(1, 5, 16).mean(1)));
  ViTConfig c = small("virchow2");
  c.num_classes = 3;  // a head over the 96-d pooled features
  EXPECT_EQ(VisionTransformer(c)->forward_head(f).sizes(), (std::vector<int64_t>{2, 3}));
}

TEST(Encoders, SwigluPackedGatesTheFirstHalf) {
  MlpOptions o;
  o.act = Activation::silu;
  o.packed_glu = true;
  Mlp mlp(8, 12, "fc1", "fc2", o);
  EXPECT_EQ(mlp->fc2->weight.sizes(), (std::vector<int64_t>{8, 6}));
  const auto x = torch::randn({3, 8});
  const auto h = torch::nn::functional::linear(x, mlp->fc1->weight, mlp->fc1->bias);
  const auto want = torch::nn::functional::linear(torch::silu(h.narrow(1, 0, 6)) * h.narrow(1, 6, 6), mlp->fc2->weight, mlp->fc2->bias);
  EXPECT_TRUE(torch::allclose(mlp(x), want, 1e-6, 1e-6));
}

// A Hugging Face Dinov2Model state dict (counter weights under its own names).
StateDict hf_dinov2_state(int64_t D, int64_t grid, int64_t patch) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> keys = {
      {"embeddings.cls_token", {1, 1, D}}, {"embeddings.mask_token", {1, D}},
      {"embeddings.position_embeddings", {1, grid * grid + 1, D}},
      {"embeddings.patch_embeddings.projection.weight", {D, 3, patch, patch}},
      {"embeddings.patch_embeddings.projection.bias", {D}}, {"layernorm.weight", {D}}, {"layernorm.bias", {D}}};
  for (const char* n : {"norm1", "norm2"})
    for (const char* p : {"weight", "bias"}) keys.push_back({std::string("encoder.layer.0.") + n + "." + p, {D}});
  for (const char* n : {"query", "key", "value"}) {
    keys.push_back({std::string("encoder.layer.0.attention.attention.") + n + ".weight", {D, D}});
    keys.push_back({std::string("encoder.layer.0.attention.attention.") + n + ".bias", {D}});
  }
  keys.push_back({"encoder.layer.0.attention.output.dense.weight", {D, D}});
  keys.push_back({"encoder.layer.0.attention.output.dense.bias", {D}});
  keys.push_back({"encoder.layer.0.layer_scale1.lambda1", {D}});
  keys.push_back({"encoder.layer.0.layer_scale2.lambda1", {D}});
  keys.push_back({"encoder.layer.0.mlp.fc1.weight", {4 * D, D}});
  keys.push_back({"encoder.layer.0.mlp.fc1.bias", {4 * D}});
  keys.push_back({"encoder.layer.0.mlp.fc2.weight", {D, 4 * D}});
  keys.push_back({"encoder.layer.0.mlp.fc2.bias", {D}});
  return counter_state_dict(keys);
}

TEST(Encoders, Dinov2CheckpointLoadsByItsOwnNames) {
  const auto hf = hf_dinov2_state(48, 4, 16);
  VisionTransformer m(small("phikon_v2"));
  const auto report = load_state_dict(*m, adapt_vit_checkpoint(hf, *m));
  EXPECT_TRUE(report.complete()) << report.summary();
  const auto& q = hf.at("encoder.layer.0.attention.attention.query.weight");
  const auto& v = hf.at("encoder.layer.0.attention.attention.value.bias");
  auto* blk = m->blocks[0]->as<ViTBlock>();
  EXPECT_TRUE(torch::equal(blk->attn->qkv->weight.narrow(0, 0, 48), q));  // rows q, k, v as timm lays them out
  EXPECT_TRUE(torch::equal(blk->attn->qkv->bias.narrow(0, 96, 48), v));
  EXPECT_TRUE(torch::equal(blk->ls2->gamma, hf.at("encoder.layer.0.layer_scale2.lambda1")));
  EXPECT_TRUE(torch::equal(m->norm->weight, hf.at("layernorm.weight")));

  auto broken = hf;
  broken.erase("encoder.layer.0.attention.attention.key.weight");
  try {
    dinov2_hf_to_timm(broken);
    ADD_FAILURE() << "a missing key projection was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.0.attn.qkv.weight needs query, key and value; key is missing"), std::string::npos)
        << e.what();
  }
}

// Dinov2Model keeps its table's grid and interpolates from it for each input, without antialias.
TEST(Encoders, Dinov2TakesTheCheckpointGridAndInterpolatesWithoutAntialias) {
  VisionTransformer m(small("phikon_v2"));  // 4x4 grid
  const auto hf = hf_dinov2_state(48, 6, 16);   // a checkpoint trained on a 6x6 grid
  ASSERT_TRUE(load_state_dict(*m, adapt_vit_checkpoint(hf, *m)).complete());
  EXPECT_EQ(m->pos_embed.sizes(), (std::vector<int64_t>{1, 37, 48}));
  m->eval();
  torch::NoGradGuard ng;
  const auto x = counter_image("input", 64);  // 4x4 patches: the 6x6 table is interpolated down
  const auto pos = hf.at("embeddings.position_embeddings");
  auto grid = pos.narrow(1, 1, 36).reshape({1, 6, 6, 48}).permute({0, 3, 1, 2});
  grid = torch::nn::functional::interpolate(grid, torch::nn::functional::InterpolateFuncOptions()
                                                      .size(std::vector<int64_t>{4, 4}).mode(torch::kBicubic).align_corners(false));
  const auto want = torch::cat({pos.narrow(1, 0, 1), grid.permute({0, 2, 3, 1}).reshape({1, 16, 48})}, 1);
  EXPECT_TRUE(torch::equal(resample_abs_pos_embed(m->pos_embed, {4, 4}, std::nullopt, 1, false), want));
  EXPECT_EQ(m->forward_features(x).sizes(), (std::vector<int64_t>{1, 17, 48}));
}

TEST(Encoders, ConfigsRefuseWhatTimmRefuses) {
  ViTConfig c = small("virchow2");
  c.fc_norm = true;
  EXPECT_THROW(VisionTransformer{c}, std::invalid_argument);  // fc_norm after token+avg
  c = small("uni2_h");
  c.mlp_layer = "swiglu";
  EXPECT_THROW(VisionTransformer{c}, std::invalid_argument);
  c = small("phikon_v2");
  c.reg_tokens = 4;
  EXPECT_THROW(VisionTransformer{c}, std::invalid_argument);  // Dinov2Model has no registers
  c = small("gigapath_tile");
  c.preprocess.crop = 512;
  EXPECT_THROW(VisionTransformer{c}, std::invalid_argument);
}

}  // namespace
