// Prov-GigaPath's LongNetViT slide encoder: the dilated attention against a
// literal transcription of torchscale's rearranges (float64, naive softmax),
// forward and gradients, including the shapes the fixture does not reach
// (several segments, head and segment padding, segments that are not a
// multiple of the dilation); then the gigapath_slide_tiny fixture (the
// published code in float64) by its original key names.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fixtures.h"
#include "tessera/models/config.h"
#include "tessera/models/dilated_attention.h"
#include "tessera/models/longnet.h"
#include "tessera/models/state_dict.h"

namespace {

using namespace tessera::models;
using namespace tessera::models::testing;
using torch::Tensor;
namespace F = torch::nn::functional;

int64_t pad_to(int64_t n, int64_t m) { return (m - n % m) % m; }

// torchscale DilatedAttention.dense_to_sparse on [b, g, H, d].
Tensor dense_to_sparse(Tensor x, int64_t r) {
  const int64_t b = x.size(0), H = x.size(2), d = x.size(3);
  x = F::pad(x, F::PadFuncOptions({0, 0, 0, pad_to(H, r), 0, pad_to(x.size(1), r)}));
  const int64_t l = x.size(1) / r, h = x.size(2) / r;
  // 'b (l r1) (r2 h) d -> b l h d r1 r2', diagonal over (r1, r2), 'b l h d r -> b l (r h) d'
  x = x.view({b, l, r, r, h, d}).permute({0, 1, 4, 5, 2, 3}).diagonal(0, 4, 5);
  return x.permute({0, 1, 4, 2, 3}).reshape({b, l, r * h, d}).narrow(2, 0, H);
}

// sparse_to_dense: out [b, l, H, d], lse [b, H, l] -> [b, H, l*r, d], [b, H, l*r, 1].
std::pair<Tensor, Tensor> sparse_to_dense(Tensor out, Tensor lse, int64_t r) {
  const int64_t b = out.size(0), l = out.size(1), H = out.size(2), d = out.size(3), hp = pad_to(H, r);
  out = F::pad(out, F::PadFuncOptions({0, 0, 0, hp}));
  lse = F::pad(lse, F::PadFuncOptions({0, 0, 0, hp}).value(-1e8));
  const int64_t h = (H + hp) / r;
  out = torch::diag_embed(out.view({b, l, r, h, d}).permute({0, 1, 3, 4, 2}), 0, 4, 5);  // b l h d r1 r2
  out = out.permute({0, 5, 2, 1, 4, 3}).reshape({b, r * h, l * r, d});
  lse = torch::diag_embed(lse.view({b, r, h, l}).permute({0, 3, 2, 1}), 0, 3, 4);  // b l h r1 r2
  lse = lse.masked_fill(lse == 0, -1e8).permute({0, 4, 2, 1, 3}).reshape({b, r * h, l * r, 1});
  return {out.narrow(1, 0, H), lse.narrow(1, 0, H)};
}

// The whole DilatedAttention.forward between the projections, float64.
Tensor reference(Tensor q, Tensor k, Tensor v, const DilatedAttentionOptions& o) {
  const int64_t B = q.size(0), N = q.size(1), H = q.size(2), d = q.size(3);
  std::vector<Tensor> outs, lses;
  for (size_t i = 0; i < o.segment_lengths.size(); ++i) {
    const int64_t sl = std::min(o.segment_lengths[i], N), r = o.dilated_ratios[i], n = (N + pad_to(N, sl)) / sl;
    auto gathering = [&](Tensor x) {
      x = F::pad(x, F::PadFuncOptions({0, 0, 0, 0, 0, pad_to(N, sl)}));
      return dense_to_sparse(x.reshape({B * n, sl, H, d}), r);
    };
    auto qi = gathering(q), ki = gathering(k), vi = gathering(v);
    auto s = torch::einsum("blhd,bmhd->bhlm", {qi, ki}) / std::sqrt(double(d));
    auto lse = torch::logsumexp(s, -1);
    auto out = torch::einsum("bhlm,bmhd->blhd", {torch::softmax(s, -1), vi});
    auto [o_d, l_d] = sparse_to_dense(out, lse, r);
    const int64_t g = o_d.size(2);
    outs.push_back(o_d.view({B, n, H, g, d}).permute({0, 2, 1, 3, 4}).reshape({B * H, n * g, d}).narrow(1, 0, N));
    lses.push_back(l_d.view({B, n, H, g, 1}).permute({0, 2, 1, 3, 4}).reshape({B * H, n * g, 1}).narrow(1, 0, N));
  }
  if (!o.merge_weights_grad)
    for (auto& l : lses) l = l.detach();
  auto top = std::get<0>(torch::stack(lses).max(0));
  std::vector<Tensor> w;
  for (auto& l : lses) w.push_back(torch::exp(l - top));
  auto sum = torch::stack(w).sum(0);
  Tensor out = torch::zeros_like(outs[0]);
  for (size_t i = 0; i < outs.size(); ++i) out = out + outs[i] * (w[i] / sum);
  return out.view({B, H, N, d}).permute({0, 2, 1, 3});
}

struct Case {
  int64_t B, N, H, D;
  std::vector<int64_t> sl, dr;
};

void check_against_reference(const Case& c, bool merge_grad) {
  torch::manual_seed(c.N * 31 + c.H);
  auto q = torch::randn({c.B, c.N, c.H, c.D}, torch::kDouble), k = torch::randn_like(q), v = torch::randn_like(q);
  auto g = torch::randn_like(q);
  DilatedAttentionOptions o{c.sl, c.dr, merge_grad};
  auto q64 = q.clone().requires_grad_(), k64 = k.clone().requires_grad_(), v64 = v.clone().requires_grad_();
  auto ref = reference(q64, k64, v64, o);
  (ref * g).sum().backward();
  auto q32 = q.to(torch::kFloat).requires_grad_(), k32 = k.to(torch::kFloat).requires_grad_(),
       v32 = v.to(torch::kFloat).requires_grad_();
  auto out = dilated_attention(q32, k32, v32, o);
  (out * g.to(torch::kFloat)).sum().backward();
  const std::string what = "N " + std::to_string(c.N) + " H " + std::to_string(c.H) + (merge_grad ? "" : " detached");
  EXPECT_LT(rel_error(out, ref), 1e-5) << what;
  EXPECT_LT(rel_error(q32.grad(), q64.grad()), 1e-4) << what << " dq";
  EXPECT_LT(rel_error(k32.grad(), k64.grad()), 1e-4) << what << " dk";
  EXPECT_LT(rel_error(v32.grad(), v64.grad()), 1e-4) << what << " dv";
}

const std::vector<Case> kCases = {
    {1, 37, 5, 8, {8, 12, 64}, {1, 2, 4}},        // several padded segments; 5 heads padded to 6 and 8
    {2, 40, 4, 6, {10, 7, 9}, {1, 2, 4}},         // segments of 7 and 9 padded to 8 and 12: shifted scatter
    {1, 33, 2, 4, {16, 33, 100}, {1, 4, 8}},      // more groups than heads
    {1, 24, 4, 8, {8, 24}, {1, 2}},               // everything divides: the view path
    {1, 30, 6, 8, {12, 30}, {2, 3}},              // no r = 1 branch: some (position, head) pairs stay uncovered
};

TEST(DilatedAttention, MatchesTorchscaleTranscription) {
  for (const auto& c : kCases) check_against_reference(c, /*merge_grad=*/true);
}

TEST(DilatedAttention, DetachedMergeWeightsMatchTheReferenceGradients) {
  for (const auto& c : kCases) check_against_reference(c, /*merge_grad=*/false);
  // The two settings share the forward but not the gradient: the checks above tell them apart.
  const auto& c = kCases[0];
  auto q = torch::randn({c.B, c.N, c.H, c.D}), k = torch::randn_like(q), v = torch::randn_like(q);
  std::vector<Tensor> dq;
  for (bool merge_grad : {true, false}) {
    auto qq = q.clone().requires_grad_();
    dilated_attention(qq, k, v, {c.sl, c.dr, merge_grad}).pow(2).sum().backward();
    dq.push_back(qq.grad());
  }
  EXPECT_GT(rel_error(dq[1], dq[0]), 1e-3);
}

TEST(DilatedAttention, RejectsBadArguments) {
  auto q = torch::randn({1, 8, 2, 4});
  EXPECT_THROW(dilated_attention(q, q, q, {{4}, {1, 2}}), std::invalid_argument);
  EXPECT_THROW(dilated_attention(q, q, q, {{0}, {1}}), std::invalid_argument);
  EXPECT_THROW(dilated_attention(q, q.narrow(1, 0, 4), q, {{4}, {1}}), std::invalid_argument);
}

TEST(LongNetViT, PositionEmbeddingIsMaesTableRow) {
  // get_2d_sincos_pos_embed(dim, G)[1 + c0 * G + c1] for cell (c0, c1).
  const int64_t dim = 16, G = 7;
  auto coords = torch::tensor({{3 * 256.0 + 100, 5 * 256.0}}, torch::kDouble);
  auto pe = slide_pos_embed(coords, dim, G);
  auto omega = 1.0 / torch::pow(10000.0, torch::arange(4, torch::kDouble) / 4.0);
  auto e = [&](double p) { return torch::cat({(p * omega).sin(), (p * omega).cos()}); };
  auto expect = torch::cat({e(5), e(3)}).to(torch::kFloat);  // w (column = cell1) first, then h
  EXPECT_LT((pe[0] - expect).abs().max().item<double>(), 1e-7);
  EXPECT_THROW(slide_pos_embed(torch::tensor({{7 * 256.0, 0.0}}), dim, G), std::invalid_argument);
  EXPECT_THROW(slide_pos_embed(torch::tensor({{-1.0, 0.0}}), dim, G), std::invalid_argument);
}

TEST(LongNetViT, SegmentLengthsAsGigaPathDerivesThem) {
  EXPECT_EQ(gigapath_segment_lengths(262144, 256), (std::vector<int64_t>{1024, 5792, 32768, 185363, 1048576}));
}

TEST(LongNetViT, StateDictKeysAreGigaPaths) {
  LongNetViT m(gigapath_slide_tiny_config());
  const auto keys = state_dict(*m);
  for (const char* k : {"cls_token", "patch_embed.proj.weight", "encoder.layers.0.self_attn.q_proj.weight",
                        "encoder.layers.2.self_attn.inner_attn_ln.bias", "encoder.layers.1.self_attn_layer_norm.weight",
                        "encoder.layers.0.ffn.ffn_layernorm.weight", "encoder.layers.0.ffn.fc2.bias",
                        "encoder.layers.0.final_layer_norm.weight", "encoder.layer_norm.weight", "norm.bias"})
    EXPECT_TRUE(keys.count(k)) << k;
  EXPECT_EQ(keys.count("pos_embed"), 0u);
}

TEST(LongNetViT, ConfigFiles) {
  TESSERA_REQUIRE_YAML();
  const auto tiny = load_longnet_vit_config(config_file("gigapath_slide_tiny.yaml"));
  const auto expect = gigapath_slide_tiny_config();
  EXPECT_EQ(tiny.embed_dim, expect.embed_dim);
  EXPECT_EQ(tiny.depth, expect.depth);
  EXPECT_EQ(tiny.num_heads, expect.num_heads);
  EXPECT_EQ(tiny.norm_eps, expect.norm_eps);
  EXPECT_EQ(tiny.segment_length, expect.segment_length);
  EXPECT_EQ(tiny.dilated_ratio, expect.dilated_ratio);
  const auto big = load_longnet_vit_config(config_file("gigapath_slide_enc12l768d.yaml"));
  EXPECT_EQ(big.embed_dim, 768);
  EXPECT_EQ(big.depth, 12);
  EXPECT_EQ(big.num_heads, 16);
  EXPECT_EQ(big.norm_eps, 1e-6);
  EXPECT_EQ(big.segment_length, gigapath_segment_lengths());
}

TEST(LongNetViT, GigaPathSlideTinyFixture) {
  TESSERA_REQUIRE_FIXTURE("gigapath_slide_tiny_w.safetensors");
  TESSERA_REQUIRE_FIXTURE("gigapath_slide_tiny_x0.safetensors");
  TESSERA_REQUIRE_FIXTURE("gigapath_slide_tiny_io.safetensors");
  LongNetViT model(gigapath_slide_tiny_config());
  model->eval();
  const auto report = load_longnet_vit_weights(*model, {fixture("gigapath_slide_tiny_w.safetensors")}, {"weights."});
  EXPECT_TRUE(report.complete()) << report.summary();
  const auto x = safetensors::load(fixture("gigapath_slide_tiny_x0.safetensors")).at("tile_embeddings");
  const auto io = safetensors::load(fixture("gigapath_slide_tiny_io.safetensors"));

  torch::NoGradGuard no_grad;
  const auto encoder_out = model->forward_features(x, io.at("coords"));
  const auto slide = model->forward(x, io.at("coords"));
  ASSERT_EQ(encoder_out.sizes(), io.at("encoder_out").sizes());
  ASSERT_EQ(slide.size(), 1u);
  ASSERT_EQ(slide[0].sizes(), io.at("slide_embedding").sizes());
  const double e_enc = rel_error(encoder_out, io.at("encoder_out"));
  const double e_slide = rel_error(slide[0], io.at("slide_embedding"));
  std::cout << "gigapath_slide_tiny: encoder_out rel err " << e_enc << ", slide_embedding " << e_slide << "\n";
  EXPECT_LT(e_enc, 1e-4);
  EXPECT_LT(e_slide, 1e-4);

  const auto all = model->forward(x, io.at("coords"), /*all_layer_embed=*/true);
  EXPECT_EQ(all.size(), 4u);  // the input and each of the 3 layers
}

// The published weights come as slide_encoder.pth: torch.save({"model": state_dict, ...}).
// Python writes one from a model's safetensors (read without the safetensors package).
TEST(LongNetViT, LoadsSlideEncoderPthByItsKeyNames) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch (install python3-torch)";
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tessera_longnet_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  LongNetViTConfig c;
  c.in_chans = 12;
  c.embed_dim = 32;
  c.depth = 2;
  c.num_heads = 4;
  LongNetViT a(c);
  for (auto& p : a->parameters()) p.data().normal_();
  safetensors::save((dir / "w.safetensors").string(), state_dict(*a));
  std::ofstream((dir / "to_pth.py").string()) << R"(import json, struct, sys, torch
d = sys.argv[1]
raw = open(d + "/w.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
sd = {}
for k, v in head.items():
    if k == "__metadata__": continue
    a, b = v["data_offsets"]
    sd[k] = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=torch.float32).reshape(v["shape"])
torch.save({"model": sd, "epoch": 3, "optimizer": {"lr": 0.1}}, d + "/slide_encoder.pth")
)";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + (dir / "to_pth.py").string() + " " + dir.string()).c_str()), 0);
  LongNetViT b(c);
  const auto report = load_longnet_vit_weights(*b, {(dir / "slide_encoder.pth").string()});
  EXPECT_TRUE(report.complete()) << report.summary();
  const auto sa = state_dict(*a), sb = state_dict(*b);
  for (const auto& [k, t] : sa) EXPECT_TRUE(torch::equal(t, sb.at(k))) << k;
  fs::remove_all(dir);
}

// A two-layer, 32-d encoder with three branches over a few dozen tiles.
LongNetViTConfig small_config() {
  LongNetViTConfig c;
  c.in_chans = 12;
  c.embed_dim = 32;
  c.depth = 2;
  c.num_heads = 4;
  c.segment_length = {8, 16, 64};
  c.dilated_ratio = {1, 2, 4};
  return c;
}

TEST(LongNetViT, GradientsReachEveryParameter) {
  LongNetViT m(small_config());
  for (auto& p : m->parameters()) p.data().normal_(0, 0.2);
  auto tiles = torch::randn({1, 41, 12});
  auto coords = torch::randint(0, 40, {1, 41, 2}).to(torch::kFloat) * 256;
  m->forward(tiles, coords)[0].pow(2).sum().backward();
  for (const auto& p : m->named_parameters())
    EXPECT_TRUE(p.value().grad().defined() && p.value().grad().abs().sum().item<double>() > 0) << p.key();
}

}  // namespace

namespace tessera::models {
namespace {

// Without autograd the feed-forward layers run in row slices (a million tiles' hidden
// activations would not fit): the slices must give what one pass gives, ragged last slice included.
TEST(LongNetViT, InferenceSlicesGiveTheWholePassResult) {
  LongNetViTConfig c = small_config();
  c.inference_slice_rows = 7;  // 40 tiles + the class token: five slices of 7, then a ragged one of 6
  LongNetViT sliced(c);
  for (auto& p : sliced->parameters()) p.data().normal_(0, 0.2);
  const auto tiles = torch::randn({1, 40, 12});
  const auto coords = torch::randint(0, 40, {1, 40, 2}).to(torch::kFloat) * 256;
  torch::Tensor whole;
  {
    torch::AutoGradMode grad(true);  // autograd on: one pass over all rows
    whole = sliced->forward_features(tiles, coords).detach();
  }
  torch::NoGradGuard no_grad;
  auto out = sliced->forward_features(tiles, coords);
  EXPECT_LT(rel_error(out, whole), 1e-6);
  EXPECT_TRUE(sliced->encoder->layers[0]->as<LongNetEncoderLayer>()->ffn->forward(torch::full({2, 5, 32}, NAN))
                  .isnan().all().item<bool>());
}

TEST(LongNetViT, RejectsNonPositiveSliceRows) {
  LongNetViTConfig c;
  c.inference_slice_rows = 0;
  EXPECT_THROW(c.validate(), std::invalid_argument);
}

}  // namespace
}  // namespace tessera::models
