// MONAI SwinUNETR equivalence: the swin_unetr_fs12 fixture (MONAI 1.5.0,
// float64 reference, sharded weights) must reproduce the five swinViT hidden
// states and the logits for a 64^3 input. 64^3 exercises the padded shifted
// windows (32 -> 35, 16 -> 21, 8 -> 14) and the clamped 4^3 window of stage 4,
// whose bias uses MONAI's sliced index.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>

#include "fixtures.h"
#include "tessera/models/config.h"
#include "tessera/models/state_dict.h"
#include "tessera/models/swin_unetr.h"

namespace {

using namespace tessera::models;
using namespace tessera::models::testing;

SwinUNETRConfig small_config() {
  SwinUNETRConfig c;
  c.feature_size = 12;
  c.out_channels = 3;
  return c;
}

TEST(SwinUNETR, Fs12Fixture) {
  TESSERA_REQUIRE_FIXTURE("swin_unetr_fs12_io.safetensors");
  const auto io = safetensors::load(fixture("swin_unetr_fs12_io.safetensors"));
  SwinUNETR model(swin_unetr_fs12_config());
  model->eval();
  const auto report = load_weights(*model, {fixture("swin_unetr_fs12_weights-1of2.safetensors"),
                                            fixture("swin_unetr_fs12_weights-2of2.safetensors")});
  EXPECT_TRUE(report.complete()) << report.summary();

  torch::NoGradGuard no_grad;
  const auto t0 = std::chrono::steady_clock::now();
  const auto hs = model->hidden_states(io.at("input"));
  const auto t1 = std::chrono::steady_clock::now();
  ASSERT_EQ(hs.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    const auto& ref = io.at("swinViT.hidden_states." + std::to_string(i));
    ASSERT_EQ(hs[i].sizes(), ref.sizes()) << "hidden state " << i;
    const double e = rel_error(hs[i], ref);
    std::cout << "swin_unetr_fs12: hidden_states." << i << " rel err " << e << "\n";
    EXPECT_LT(e, 1e-4) << "hidden state " << i;
  }
  const auto out = model->decode(io.at("input"), hs);
  const auto t2 = std::chrono::steady_clock::now();
  ASSERT_EQ(out.sizes(), io.at("output").sizes());
  const double e = rel_error(out, io.at("output"));
  std::cout << "swin_unetr_fs12: output rel err " << e << " (encoder "
            << std::chrono::duration<double>(t1 - t0).count() << " s, decoder "
            << std::chrono::duration<double>(t2 - t1).count() << " s)\n";
  EXPECT_LT(e, 1e-4);
}

TEST(SwinUNETR, RelativePositionIndexMatchesMonais) {
  TESSERA_REQUIRE_FIXTURE("swin_unetr_fs12_weights-1of2.safetensors");
  // The fixture stores MONAI's buffer (as F32): ours must be the same table.
  const auto ref = safetensors::File(fixture("swin_unetr_fs12_weights-1of2.safetensors"))
                       .tensor("swinViT.layers1.0.blocks.0.attn.relative_position_index");
  EXPECT_TRUE(torch::equal(relative_position_index_3d({7, 7, 7}), ref.to(torch::kLong)));
}

TEST(SwinUNETR, ShiftMaskSeparatesRegionsOfTheRolledVolume) {
  const auto mask = compute_mask({14, 14, 14}, {7, 7, 7}, {3, 3, 3}, torch::kCPU);
  ASSERT_EQ(mask.sizes(), (std::vector<int64_t>{8, 343, 343}));
  // Window 0 lies inside region 0 on every axis: nothing masked.
  EXPECT_EQ(mask[0].abs().sum().item<float>(), 0.0f);
  // The last window mixes 8 regions (2 per axis): token 0 and the last token differ.
  EXPECT_EQ(mask[7][0][342].item<float>(), -100.0f);
  EXPECT_TRUE(torch::equal(mask, mask.transpose(1, 2)));
  // No shift along an axis: that axis contributes no separation.
  const auto flat = compute_mask({14, 7, 7}, {7, 7, 7}, {3, 0, 0}, torch::kCPU);
  EXPECT_EQ(flat[0].abs().sum().item<float>(), 0.0f);
}

TEST(SwinUNETR, ClampedWindowUsesMonaisSlicedIndex) {
  WindowAttention attn(12, 3, Size3{7, 7, 7}, true);
  const auto bias = attn->relative_position_bias(64);  // a 4^3 window (stage 4 at 64^3 input)
  const auto idx = relative_position_index_3d({7, 7, 7}).narrow(0, 0, 64).narrow(1, 0, 64);
  EXPECT_TRUE(torch::equal(bias[1], attn->relative_position_bias_table.select(1, 1).index({idx.reshape(-1)}).view({64, 64})));
  // ...which is not the geometric 4^3 index.
  EXPECT_FALSE(torch::equal(idx, relative_position_index_3d({4, 4, 4})));
}

// Training goes through the op's backward: the gradient must reach the
// bias table through the broadcast [H, n, n] bias, as MONAI's matmul-softmax does.
TEST(SwinUNETR, WindowAttentionGradientsMatchMonaisMatmulSoftmax) {
  torch::manual_seed(7);
  const int64_t nW = 4, images = 2, n = 27, C = 12, H = 3;
  WindowAttention attn(C, H, Size3{3, 3, 3}, true);
  const auto x = torch::randn({images * nW, n, C});
  const auto mask = torch::where(torch::rand({nW, n, n}) < 0.3, torch::full({}, -100.0f), torch::zeros({}));

  auto grads = [&](const std::function<torch::Tensor()>& f) {
    attn->zero_grad();
    f().pow(2).sum().backward();
    return std::vector<torch::Tensor>{attn->relative_position_bias_table.grad().clone(), attn->qkv->weight.grad().clone(),
                                      attn->proj->weight.grad().clone()};
  };
  const auto ours = grads([&] { return attn->forward(x, mask); });
  const auto monai = grads([&] {  // WindowAttention.forward of MONAI 1.5, verbatim in LibTorch ops
    const int64_t b = x.size(0), D = C / H;
    const auto qkv = attn->qkv(x).reshape({b, n, 3, H, D}).permute({2, 0, 3, 1, 4});
    auto a = (qkv[0] * std::pow(D, -0.5)).matmul(qkv[1].transpose(-2, -1)) + attn->relative_position_bias(n).unsqueeze(0);
    a = (a.view({b / nW, nW, H, n, n}) + mask.unsqueeze(1).unsqueeze(0)).view({-1, H, n, n});
    return attn->proj(torch::softmax(a, -1).matmul(qkv[2]).transpose(1, 2).reshape({b, n, C}));
  });
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_GT(ours[i].abs().sum().item<double>(), 0.0) << i;
    EXPECT_LT(rel_error(ours[i], monai[i]), 1e-4) << "gradient " << i;
  }
}

TEST(SwinUNETR, MergingModesDifferOnlyInSubVoxelOrder) {
  torch::NoGradGuard no_grad;
  PatchMerging v15(6, "merging"), legacy(6, "merging_legacy"), v2(6, "mergingv2");
  load_state_dict(*legacy, state_dict(*v15));
  load_state_dict(*v2, state_dict(*v15));
  // MONAI 1.5 fixed x4..x6; MONAI <= 1.4 repeated (0,1,0) and (0,0,1) instead.
  EXPECT_EQ(v15->order[4], (Size3{1, 1, 0}));
  EXPECT_EQ(legacy->order[5], (Size3{0, 1, 0}));
  EXPECT_EQ(legacy->order[6], (Size3{0, 0, 1}));
  EXPECT_EQ(v2->order[1], (Size3{0, 0, 1}));
  const auto x = torch::randn({1, 5, 4, 3, 6});  // odd dims are padded
  const auto a = v15(x), b = legacy(x), c = v2(x);
  EXPECT_EQ(a.sizes(), (std::vector<int64_t>{1, 3, 2, 2, 12}));
  EXPECT_FALSE(torch::allclose(a, b));
  EXPECT_FALSE(torch::allclose(a, c));
}

TEST(SwinUNETR, StateDictMatchesMonaisKeysAndSizes) {
  SwinUNETR v1(small_config());
  const auto sd = state_dict(*v1);
  int64_t params = 0, all = 0;
  for (const auto& p : v1->parameters()) params += p.numel();
  for (const auto& [k, t] : sd) all += t.numel();
  // MONAI 1.5: 4,078,220 parameters for out_channels 14 (research notes); 11 fewer
  // output channels of a 12-channel 1x1x1 conv with bias.
  EXPECT_EQ(params, 4078220 - 11 * 13);
  EXPECT_EQ(all, 5019269);  // manifest: parameters + the 8 index buffers
  EXPECT_TRUE(sd.count("swinViT.layers4.0.blocks.1.attn.relative_position_bias_table"));
  EXPECT_TRUE(sd.count("encoder1.layer.conv3.conv.weight"));
  EXPECT_FALSE(sd.count("encoder2.layer.conv3.conv.weight"));
  EXPECT_TRUE(sd.count("decoder5.transp_conv.conv.weight"));
  EXPECT_TRUE(sd.count("out.conv.conv.bias"));

  auto c = small_config();
  c.use_v2 = true;
  SwinUNETR v2(c);
  const auto sd2 = state_dict(*v2);
  EXPECT_TRUE(sd2.count("swinViT.layers1c.0.layer.conv1.conv.weight"));
  EXPECT_TRUE(sd2.count("swinViT.layers4c.0.layer.conv2.conv.weight"));
  EXPECT_EQ(sd2.size(), sd.size() + 8);
}

// The fixture has one image; with two, windows of both share one attention
// call and window b*nW + w must still get shift mask w.
TEST(SwinUNETR, BatchOfTwoEqualsEachImageAlone) {
  torch::manual_seed(8);
  SwinUNETR model(small_config());
  model->eval();
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({2, 1, 64, 32, 32});  // stage 1: 32x16x16 -> padded 35x21x21, 45 shifted windows
  const auto both = model->forward(x);
  for (int64_t i = 0; i < 2; ++i) EXPECT_LT(rel_error(both[i], model->forward(x.narrow(0, i, 1))[0]), 1e-5) << i;
}

TEST(SwinUNETR, SslEncoderWeightsMapOntoSwinViT) {
  SwinUNETR model(small_config());
  // The encoder of our own model under the SSL checkpoint's names.
  StateDict ssl;
  for (const auto& [k, t] : state_dict(*model->swinViT)) {
    std::string name = "module." + k;
    for (const auto& [from, to] : {std::pair<std::string, std::string>{".linear1.", ".fc1."}, {".linear2.", ".fc2."}}) {
      const auto pos = name.find(from);
      if (pos != std::string::npos) name.replace(pos, from.size(), to);
    }
    ssl[name] = t;
  }
  ASSERT_TRUE(ssl.count("module.layers1.0.blocks.0.mlp.fc1.weight"));
  const auto r = load_state_dict(*model, remap_keys(ssl, swin_unetr_ssl_key_mapping()), /*strict=*/false);
  EXPECT_TRUE(r.unexpected.empty()) << r.summary();
  EXPECT_EQ(r.loaded, ssl.size());
  for (const auto& m : r.missing) EXPECT_EQ(m.rfind("swinViT.", 0), std::string::npos) << m;  // only the decoder is missing

  StateDict research{{"module.swin_vit.patch_embed.proj.weight", torch::zeros({12, 1, 2, 2, 2})}};
  EXPECT_TRUE(remap_keys(research, swin_unetr_research_key_mapping()).count("swinViT.patch_embed.proj.weight"));
}

TEST(SwinUNETR, V2RunsAndRejectsSizesMonaiRejects) {
  auto c = small_config();
  c.use_v2 = true;
  SwinUNETR model(c);
  model->eval();
  torch::NoGradGuard no_grad;
  EXPECT_EQ(model->forward(torch::randn({1, 1, 32, 32, 64})).sizes(), (std::vector<int64_t>{1, 3, 32, 32, 64}));
  EXPECT_THROW(model->forward(torch::randn({1, 1, 32, 32, 48})), c10::Error);
}

}  // namespace

namespace tessera::models {
namespace {

// patch_norm (MONAI's PatchEmbed with norm_layer=nn.LayerNorm): the embedding is
// LayerNorm over channels of the patch convolution, under the key patch_embed.norm.
TEST(SwinUNETR, PatchNormIsLayerNormOverChannelsOfTheEmbedding) {
  SwinUNETRConfig c = testing::swin_unetr_fs12_config();
  c.patch_norm = true;
  SwinTransformer vit(c);
  torch::NoGradGuard ng;
  torch::nn::init::normal_(vit->patch_embed_norm->weight);
  torch::nn::init::normal_(vit->patch_embed_norm->bias);
  bool has_key = false;
  for (const auto& p : vit->named_parameters()) has_key |= p.key() == "patch_embed.norm.weight";
  EXPECT_TRUE(has_key);
  const auto x = torch::randn({1, 1, 32, 32, 32});
  const auto emb = vit->forward(x, /*normalize=*/false)[0];
  const auto conv = vit->patch_embed_proj(x).permute({0, 2, 3, 4, 1});
  const auto want = torch::layer_norm(conv, {c.feature_size}, vit->patch_embed_norm->weight, vit->patch_embed_norm->bias, 1e-5)
                        .permute({0, 4, 1, 2, 3});
  EXPECT_LT((emb - want).abs().max().item<double>(), 1e-5);
  c.patch_norm = false;
  EXPECT_FALSE(SwinTransformer(c)->patch_embed_norm);
}

}  // namespace
}  // namespace tessera::models
