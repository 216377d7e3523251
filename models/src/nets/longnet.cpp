#include "tessera/models/longnet.h"

#include <torch/torch.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "tessera/models/dilated_attention.h"

namespace tessera::models {
namespace {

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  std::ostringstream os;
  os << "LongNetViT: ";
  (os << ... << args);
  throw std::invalid_argument(os.str());
}

torch::nn::LayerNorm layer_norm(int64_t dim, double eps) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(eps));
}

// MAE's get_1d_sincos_pos_embed_from_grid: [sin(p·ω), cos(p·ω)], ω_i = 10000^(-i / (dim/2)), i < dim/2.
torch::Tensor sincos_1d(const torch::Tensor& pos, int64_t dim) {
  const int64_t half = dim / 2;
  const auto omega = torch::pow(10000.0, -torch::arange(half, pos.options()) / double(half));
  const auto angle = pos.unsqueeze(-1) * omega;
  return torch::cat({angle.sin(), angle.cos()}, -1);
}

}  // namespace

torch::Tensor slide_pos_embed(const torch::Tensor& coords, int64_t dim, int64_t slide_ngrids) {
  if (coords.dim() < 1 || coords.size(-1) != 2) fail("coords must be [..., 2], got ", coords.sizes());
  if (dim % 4 != 0) fail("the position embedding width ", dim, " must be divisible by 4");
  // coords_to_pos: floor(coords / 256.0), then row-major index cell0 * ngrids + cell1 into
  // a table whose row k encodes (k % ngrids, k / ngrids) = (cell1, cell0).
  const auto cell = torch::floor(coords.to(torch::kDouble) / 256.0);
  if (cell.numel() > 0) {
    const double lo = cell.min().item<double>(), hi = cell.max().item<double>();
    if (lo < 0 || hi >= double(slide_ngrids))
      fail("tile coordinates must lie in [0, ", 256 * slide_ngrids, ") level-0 pixels (", slide_ngrids,
           " cells of 256 px a side), got cells from ", lo, " to ", hi);
  }
  return torch::cat({sincos_1d(cell.select(-1, 1), dim / 2), sincos_1d(cell.select(-1, 0), dim / 2)}, -1)
      .to(torch::kFloat);
}

LongNetAttentionImpl::LongNetAttentionImpl(const LongNetViTConfig& c) : c_(c) {
  q_proj = register_module("q_proj", Linear(c.embed_dim, c.embed_dim));
  k_proj = register_module("k_proj", Linear(c.embed_dim, c.embed_dim));
  v_proj = register_module("v_proj", Linear(c.embed_dim, c.embed_dim));
  out_proj = register_module("out_proj", Linear(c.embed_dim, c.embed_dim));
  inner_attn_ln = register_module("inner_attn_ln", layer_norm(c.embed_dim, c.layernorm_eps));
}

torch::Tensor LongNetAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t B = x.size(0), N = x.size(1), H = c_.num_heads, hd = c_.embed_dim / H;
  auto heads = [&](const torch::Tensor& t) { return t.view({B, N, H, hd}); };
  DilatedAttentionOptions o;
  o.segment_lengths = c_.segment_length;
  o.dilated_ratios = c_.dilated_ratio;
  o.merge_weights_grad = c_.merge_weights_grad;
  // Default scale 1/sqrt(head_dim): the reference calls FlashAttention without softmax_scale.
  auto attn = dilated_attention(heads(q_proj->forward(x)), heads(k_proj->forward(x)), heads(v_proj->forward(x)), o);
  return out_proj->forward(inner_attn_ln->forward(attn.reshape({B, N, c_.embed_dim})));
}

LongNetFeedForwardImpl::LongNetFeedForwardImpl(const LongNetViTConfig& c) : slice_rows_(c.inference_slice_rows) {
  const auto ffn_dim = static_cast<int64_t>(c.embed_dim * c.mlp_ratio);
  fc1 = register_module("fc1", Linear(c.embed_dim, ffn_dim));
  fc2 = register_module("fc2", Linear(ffn_dim, c.embed_dim));
  ffn_layernorm = register_module("ffn_layernorm", layer_norm(ffn_dim, c.layernorm_eps));
}

torch::Tensor LongNetFeedForwardImpl::forward(const torch::Tensor& x) {
  // torchscale's "gelu" is F.gelu (erf), applied in fp32.
  auto rows = [&](const torch::Tensor& t) {
    return fc2->forward(ffn_layernorm->forward(torch::gelu(fc1->forward(t).to(torch::kFloat)).to(t.scalar_type())));
  };
  // Every step is row-wise: without autograd, a million tiles go through in slices so that the
  // 4x-wide fp32 hidden activations of one slice, not of the whole slide, are held at once.
  const int64_t kSliceRows = slice_rows_;
  const int64_t n = x.numel() / x.size(-1);
  if (torch::GradMode::is_enabled() || n <= kSliceRows) return rows(x);
  const auto flat = x.reshape({n, x.size(-1)});
  auto out = torch::empty_like(flat);
  for (int64_t i = 0; i < n; i += kSliceRows) {
    const int64_t len = std::min(kSliceRows, n - i);
    out.narrow(0, i, len).copy_(rows(flat.narrow(0, i, len)));
  }
  return out.view(x.sizes());
}

LongNetEncoderLayerImpl::LongNetEncoderLayerImpl(const LongNetViTConfig& c) {
  self_attn = register_module("self_attn", LongNetAttention(c));
  self_attn_layer_norm = register_module("self_attn_layer_norm", layer_norm(c.embed_dim, c.layernorm_eps));
  ffn = register_module("ffn", LongNetFeedForward(c));
  final_layer_norm = register_module("final_layer_norm", layer_norm(c.embed_dim, c.layernorm_eps));
}

torch::Tensor LongNetEncoderLayerImpl::forward(const torch::Tensor& x) {
  auto h = x + self_attn->forward(self_attn_layer_norm->forward(x));
  return h + ffn->forward(final_layer_norm->forward(h));
}

LongNetEncoderImpl::LongNetEncoderImpl(const LongNetViTConfig& c) {
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.depth; ++i) layers->push_back(LongNetEncoderLayer(c));
  layer_norm = register_module("layer_norm", tessera::models::layer_norm(c.embed_dim, c.layernorm_eps));
}

LongNetEncoderOutput LongNetEncoderImpl::forward(const torch::Tensor& x0, bool return_all_hiddens) {
  LongNetEncoderOutput out;
  auto x = x0;
  if (return_all_hiddens) out.encoder_states.push_back(x);
  for (const auto& layer : *layers) {
    x = layer->as<LongNetEncoderLayer>()->forward(x);
    if (return_all_hiddens) out.encoder_states.push_back(x);
  }
  out.encoder_out = layer_norm->forward(x);
  return out;
}

LongNetViTImpl::LongNetViTImpl(LongNetViTConfig config) : config_(std::move(config)) {
  config_.validate();
  const auto& c = config_;
  patch_embed = register_module("patch_embed", PatchEmbed(c.in_chans, c.embed_dim));
  cls_token = register_parameter("cls_token", torch::zeros({1, 1, c.embed_dim}));
  encoder = register_module("encoder", LongNetEncoder(c));
  norm = register_module("norm", layer_norm(c.embed_dim, c.norm_eps));
}

torch::Tensor LongNetViTImpl::embed(const torch::Tensor& tiles, const torch::Tensor& coords) {
  const auto& c = config_;
  if (tiles.dim() != 3 || tiles.size(2) != c.in_chans)
    fail("tile embeddings must be [B, L, ", c.in_chans, "], got ", tiles.sizes());
  if (coords.dim() != 3 || coords.size(0) != tiles.size(0) || coords.size(1) != tiles.size(1) || coords.size(2) != 2)
    fail("coords must be [", tiles.size(0), ", ", tiles.size(1), ", 2] for tiles ", tiles.sizes(), ", got ",
         coords.sizes());
  const auto dtype = cls_token.scalar_type();
  auto x = patch_embed->proj->forward(tiles.to(dtype));
  x = x + slide_pos_embed(coords, c.embed_dim, c.slide_ngrids).to(x.device(), dtype);
  // pos_embed's class-token row is zeros: the class token enters as it is.
  return torch::cat({cls_token.expand({x.size(0), 1, c.embed_dim}), x}, 1);
}

torch::Tensor LongNetViTImpl::forward_features(const torch::Tensor& tiles, const torch::Tensor& coords) {
  return encoder->forward(embed(tiles, coords)).encoder_out;
}

torch::Tensor LongNetViTImpl::pool(const torch::Tensor& x) {
  if (config_.global_pool) return norm->forward(x.narrow(1, 1, x.size(1) - 1).mean(1));
  return norm->forward(x).select(1, 0);
}

std::vector<torch::Tensor> LongNetViTImpl::forward(const torch::Tensor& tiles, const torch::Tensor& coords,
                                                   bool all_layer_embed) {
  const auto enc = encoder->forward(embed(tiles, coords), all_layer_embed);
  std::vector<torch::Tensor> out;
  if (!all_layer_embed) {
    out.push_back(pool(enc.encoder_out));
  } else {
    for (const auto& x : enc.encoder_states) out.push_back(pool(x));
  }
  return out;
}

LoadReport load_longnet_vit_weights(LongNetViTImpl& model, const std::vector<std::string>& files,
                                    const KeyMapping& mapping) {
  KeyMapping m = mapping;
  // A checkpoint saved with the position table as a buffer: we compute it.
  m.ignore.push_back("pos_embed");
  return load_weights(model, files, m, /*strict=*/true);
}

}  // namespace tessera::models
