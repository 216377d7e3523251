// UNETR's ViT (MONAI ViT, 3-D). No reference fixture exists for it yet, so
// this checks MONAI's key names and sizes, the 96^3 -> 216-token geometry,
// and the forward against a float64 re-derivation written here from MONAI's
// code (SABlock: qkv rearranged "b h (qkv l d) -> qkv b l h d", softmax(q k^T
// * d^-0.5) v, out_proj).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "fixtures.h"
#include "tessera/models/config.h"
#include "tessera/models/state_dict.h"
#include "tessera/models/vit3d.h"

namespace {

using namespace tessera::models;
using tessera::models::testing::rel_error;

// MONAI's forward, spelled out with plain ops in float64.
torch::Tensor reference(const StateDict& w, const torch::Tensor& x, const ViT3DConfig& c) {
  auto get = [&](const std::string& k) { return w.at(k).to(torch::kDouble); };
  auto ln = [&](const torch::Tensor& t, const std::string& p) {
    return torch::layer_norm(t, {c.hidden_size}, get(p + ".weight"), get(p + ".bias"), c.norm_eps);
  };
  auto h = torch::conv3d(x.to(torch::kDouble), get("patch_embedding.patch_embeddings.weight"),
                         get("patch_embedding.patch_embeddings.bias"), c.patch_size);
  h = h.flatten(2).transpose(1, 2) + get("patch_embedding.position_embeddings");
  const int64_t B = h.size(0), N = h.size(1), H = c.num_heads, D = c.hidden_size / H;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "blocks." + std::to_string(i);
    auto qkv = torch::linear(ln(h, p + ".norm1"), get(p + ".attn.qkv.weight"));
    qkv = qkv.view({B, N, 3, H, D}).permute({2, 0, 3, 1, 4});
    const auto att = torch::softmax(qkv[0].matmul(qkv[1].transpose(-1, -2)) * std::pow(D, -0.5), -1);
    const auto o = att.matmul(qkv[2]).transpose(1, 2).reshape({B, N, H * D});
    h = h + torch::linear(o, get(p + ".attn.out_proj.weight"), get(p + ".attn.out_proj.bias"));
    const auto m = torch::gelu(torch::linear(ln(h, p + ".norm2"), get(p + ".mlp.linear1.weight"), get(p + ".mlp.linear1.bias")));
    h = h + torch::linear(m, get(p + ".mlp.linear2.weight"), get(p + ".mlp.linear2.bias"));
  }
  return ln(h, "norm");
}

TEST(ViT3D, UnetrGeometryAndMonaiKeys) {
  ViT3DConfig c;    // the defaults are UNETR's (configs/unetr_vit_b16_3d.yaml)
  c.num_layers = 1;  // the geometry and names do not depend on depth
  ViT3D model(c);
  const auto sd = state_dict(*model);
  EXPECT_EQ(sd.at("patch_embedding.position_embeddings").sizes(), (std::vector<int64_t>{1, 216, 768}));
  EXPECT_EQ(sd.at("patch_embedding.patch_embeddings.weight").sizes(), (std::vector<int64_t>{768, 1, 16, 16, 16}));
  EXPECT_EQ(sd.at("blocks.0.attn.qkv.weight").sizes(), (std::vector<int64_t>{2304, 768}));
  EXPECT_FALSE(sd.count("blocks.0.attn.qkv.bias"));  // UNETR: qkv_bias=False
  for (const char* k : {"blocks.0.attn.out_proj.bias", "blocks.0.mlp.linear1.weight", "blocks.0.norm2.bias", "norm.weight"})
    EXPECT_TRUE(sd.count(k)) << k;
}

TEST(ViT3D, MatchesAFloat64ReDerivationOfMonaisForward) {
  torch::manual_seed(5);
  ViT3DConfig c;
  c.img_size = {32, 32, 48};
  c.patch_size = {16, 16, 16};
  c.hidden_size = 48;
  c.mlp_dim = 96;
  c.num_layers = 3;
  c.num_heads = 4;
  ViT3D model(c);
  model->eval();
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.02);  // LayerNorm affine and biases matter
  const auto x = torch::randn({2, 1, 32, 32, 48});
  const auto out = model->forward(x);
  EXPECT_EQ(out.x.sizes(), (std::vector<int64_t>{2, 12, 48}));
  EXPECT_EQ(out.hidden_states.size(), 3u);
  const double e = rel_error(out.x, reference(state_dict(*model), x, c));
  EXPECT_LT(e, 1e-5) << e;
  EXPECT_THROW(model->forward(torch::randn({1, 1, 32, 32, 32})), c10::Error);
}

}  // namespace
