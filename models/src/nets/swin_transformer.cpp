#include "tessera/models/swin_transformer.h"

#include <torch/torch.h>

#include <optional>

#include "tessera/models/unetr_block.h"

namespace tessera::models {
namespace {

// Python's slice(start, stop) on a dim of length n, as [begin, end).
std::pair<int64_t, int64_t> py_slice(std::optional<int64_t> start, std::optional<int64_t> stop, int64_t n) {
  auto norm = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  const int64_t b = start ? norm(*start) : 0;
  const int64_t e = stop ? norm(*stop) : n;
  return {b, std::max(b, e)};
}

bool any_positive(const Size3& s) { return s[0] > 0 || s[1] > 0 || s[2] > 0; }

// x: [b, d, h, w, c] -> zero-padded at the end of d, h, w to multiples of ws.
torch::Tensor pad_to_windows(const torch::Tensor& x, const Size3& ws) {
  const int64_t pd = (ws[0] - x.size(1) % ws[0]) % ws[0];
  const int64_t ph = (ws[1] - x.size(2) % ws[1]) % ws[1];
  const int64_t pw = (ws[2] - x.size(3) % ws[2]) % ws[2];
  if (pd == 0 && ph == 0 && pw == 0) return x;
  return torch::constant_pad_nd(x, {0, 0, 0, pw, 0, ph, 0, pd}, 0);
}

std::vector<Size3> merging_order(const std::string& mode) {
  if (mode == "merging")  // MONAI 1.5 PatchMerging (PR #8285)
    return {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 1, 0}, {1, 0, 1}, {0, 1, 1}, {1, 1, 1}};
  if (mode == "merging_legacy")  // MONAI <= 1.4: x5 repeats x2 and x6 repeats x3, (1,1,0) and (0,1,1) unused
    return {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 0, 1}, {0, 1, 0}, {0, 0, 1}, {1, 1, 1}};
  if (mode == "mergingv2")  // itertools.product(range(2), repeat=3)
    return {{0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {0, 1, 1}, {1, 0, 0}, {1, 0, 1}, {1, 1, 0}, {1, 1, 1}};
  TORCH_CHECK(false, "PatchMerging: unknown downsample mode '", mode, "' (merging, mergingv2, merging_legacy)");
}

torch::Tensor proj_out(const torch::Tensor& x, bool normalize) {
  if (!normalize) return x;
  const auto cl = x.permute({0, 2, 3, 4, 1});  // channels last for F.layer_norm over C
  return torch::layer_norm(cl, {x.size(1)}, {}, {}, 1e-5).permute({0, 4, 1, 2, 3});
}

// torch::roll over dims 1..3 of [b, d, h, w, c]. On the CPU as one concatenation of two slices per
// rolled dim: LibTorch's CPU roll gathers element by element (12 ms against 3.5 ms for the stage-1
// tensor at 96³ on 2 cores); on the GPU roll is one kernel and stays.
torch::Tensor roll_dhw(const torch::Tensor& x, const Size3& shifts) {
  if (!x.device().is_cpu()) return torch::roll(x, {shifts[0], shifts[1], shifts[2]}, {1, 2, 3});
  torch::Tensor y = x;
  for (int a = 0; a < 3; ++a) {
    const int64_t n = y.size(a + 1), s = ((shifts[a] % n) + n) % n;
    if (s != 0) y = torch::cat({y.narrow(a + 1, n - s, s), y.narrow(a + 1, 0, n - s)}, a + 1);
  }
  return y;
}

}  // namespace

std::pair<Size3, Size3> get_window_size(const Size3& x_size, const Size3& window_size, const Size3& shift_size) {
  Size3 ws = window_size, ss = shift_size;
  for (int i = 0; i < 3; ++i)
    if (x_size[i] <= window_size[i]) {
      ws[i] = x_size[i];
      ss[i] = 0;
    }
  return {ws, ss};
}

torch::Tensor window_partition(const torch::Tensor& x, const Size3& ws) {
  const int64_t b = x.size(0), d = x.size(1), h = x.size(2), w = x.size(3), c = x.size(4);
  return x.view({b, d / ws[0], ws[0], h / ws[1], ws[1], w / ws[2], ws[2], c})
      .permute({0, 1, 3, 5, 2, 4, 6, 7})
      .contiguous()
      .view({-1, ws[0] * ws[1] * ws[2], c});
}

torch::Tensor window_reverse(const torch::Tensor& windows, const Size3& ws, const std::array<int64_t, 4>& dims) {
  const auto [b, d, h, w] = dims;
  return windows.view({b, d / ws[0], h / ws[1], w / ws[2], ws[0], ws[1], ws[2], -1})
      .permute({0, 1, 4, 2, 5, 3, 6, 7})
      .contiguous()
      .view({b, d, h, w, -1});
}

torch::Tensor compute_mask(const Size3& dims, const Size3& ws, const Size3& ss, const torch::Device& device) {
  // Built on the model's device, as MONAI does: at 96³ the stage-1 mask is [343, 343, 343], and
  // building it on the host cost tens of milliseconds plus a 160 MB copy per forward.
  auto img_mask = torch::zeros({1, dims[0], dims[1], dims[2], 1}, torch::TensorOptions().device(device));
  // The three regions per axis, as MONAI's slice(-ws), slice(-ws, -ss), slice(-ss, None).
  auto regions = [&](int i) {
    return std::array<std::pair<int64_t, int64_t>, 3>{py_slice(std::nullopt, -ws[i], dims[i]),
                                                      py_slice(-ws[i], -ss[i], dims[i]),
                                                      py_slice(-ss[i], std::nullopt, dims[i])};
  };
  float cnt = 0;
  for (const auto& [d0, d1] : regions(0))
    for (const auto& [h0, h1] : regions(1))
      for (const auto& [w0, w1] : regions(2)) {
        img_mask.narrow(1, d0, d1 - d0).narrow(2, h0, h1 - h0).narrow(3, w0, w1 - w0).fill_(cnt);
        cnt += 1;
      }
  const auto mask_windows = window_partition(img_mask, ws).squeeze(-1);  // [nW, N]
  const auto diff = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2);
  return torch::zeros_like(diff).masked_fill_(diff != 0, -100.0);
}

torch::Tensor relative_position_index_3d(const Size3& ws) {
  const int64_t n = ws[0] * ws[1] * ws[2];
  auto index = torch::empty({n, n}, torch::kLong);
  auto a = index.accessor<int64_t, 2>();
  auto coord = [&](int64_t t) { return Size3{t / (ws[1] * ws[2]), (t / ws[2]) % ws[1], t % ws[2]}; };  // meshgrid "ij"
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const auto ci = coord(i), cj = coord(j);
      const int64_t rd = ci[0] - cj[0] + ws[0] - 1, rh = ci[1] - cj[1] + ws[1] - 1, rw = ci[2] - cj[2] + ws[2] - 1;
      a[i][j] = rd * (2 * ws[1] - 1) * (2 * ws[2] - 1) + rh * (2 * ws[2] - 1) + rw;
    }
  return index;
}

WindowAttentionImpl::WindowAttentionImpl(int64_t dim, int64_t heads, const Size3& ws, bool qkv_bias) : num_heads(heads) {
  TORCH_CHECK(dim % heads == 0, "WindowAttention: dim ", dim, " is not divisible by ", heads, " heads");
  const int64_t table = (2 * ws[0] - 1) * (2 * ws[1] - 1) * (2 * ws[2] - 1);
  relative_position_bias_table = register_parameter("relative_position_bias_table", torch::randn({table, heads}) * 0.02);
  relative_position_index = register_buffer("relative_position_index", relative_position_index_3d(ws));
  qkv = register_module("qkv", Linear(torch::nn::LinearOptions(dim, 3 * dim).bias(qkv_bias)));
  proj = register_module("proj", Linear(dim, dim));
}

torch::Tensor WindowAttentionImpl::relative_position_bias(int64_t n) const {
  TORCH_CHECK(n <= relative_position_index.size(0), "WindowAttention: ", n, " tokens exceed the window's ",
              relative_position_index.size(0));
  // MONAI slices the full window's index even for a clamped window: trained weights depend on it.
  const auto idx = relative_position_index.narrow(0, 0, n).narrow(1, 0, n).reshape(-1);
  return relative_position_bias_table.index_select(0, idx).view({n, n, num_heads}).permute({2, 0, 1}).contiguous();
}

torch::Tensor WindowAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  AttentionOptions opts;
  opts.bias = relative_position_bias(x.size(1));  // [H, n, n], shared by every window
  if (mask.defined()) {
    TORCH_CHECK(x.size(0) % mask.size(0) == 0, "WindowAttention: ", x.size(0), " windows are not a multiple of the mask's ",
                mask.size(0));
    opts.mask = mask.unsqueeze(1);  // [nW, 1, n, n]: window b*nW + w uses mask w
  }
  return proj(attention_from_qkv(qkv(x), num_heads, opts));
}

SwinTransformerBlockImpl::SwinTransformerBlockImpl(int64_t dim, int64_t heads, const Size3& ws, const Size3& ss,
                                                   double mlp_ratio, bool qkv_bias)
    : window_size(ws), shift_size(ss) {
  norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  attn = register_module("attn", WindowAttention(dim, heads, ws, qkv_bias));
  norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  mlp = register_module("mlp", Mlp(dim, static_cast<int64_t>(dim * mlp_ratio), "linear1", "linear2"));
}

torch::Tensor SwinTransformerBlockImpl::forward(const torch::Tensor& x_in, const torch::Tensor& mask_matrix) {
  const int64_t b = x_in.size(0), d = x_in.size(1), h = x_in.size(2), w = x_in.size(3), c = x_in.size(4);
  const auto [ws, ss] = get_window_size({d, h, w}, window_size, shift_size);
  // Padding comes after norm1, so padded tokens are exact zeros (as in MONAI).
  auto x = pad_to_windows(norm1(x_in), ws);
  const int64_t dp = x.size(1), hp = x.size(2), wp = x.size(3);
  const bool shifted = any_positive(ss);
  if (shifted) x = roll_dhw(x, {-ss[0], -ss[1], -ss[2]});
  auto windows = attn(window_partition(x, ws), shifted ? mask_matrix : torch::Tensor());
  x = window_reverse(windows, ws, {b, dp, hp, wp});
  if (shifted) x = roll_dhw(x, {ss[0], ss[1], ss[2]});
  if (dp != d || hp != h || wp != w) x = x.narrow(1, 0, d).narrow(2, 0, h).narrow(3, 0, w).contiguous();
  x = x_in + x.view({b, d, h, w, c});
  return x + mlp(norm2(x));
}

PatchMergingImpl::PatchMergingImpl(int64_t dim, const std::string& mode) : order(merging_order(mode)) {
  reduction = register_module("reduction", Linear(torch::nn::LinearOptions(8 * dim, 2 * dim).bias(false)));
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({8 * dim})));
}

torch::Tensor PatchMergingImpl::forward(const torch::Tensor& x_in) {
  const int64_t d = x_in.size(1), h = x_in.size(2), w = x_in.size(3);
  auto x = x_in;
  if (d % 2 || h % 2 || w % 2) x = torch::constant_pad_nd(x, {0, 0, 0, w % 2, 0, h % 2, 0, d % 2}, 0);
  std::vector<torch::Tensor> parts;
  for (const auto& o : order)
    parts.push_back(x.slice(1, o[0], c10::nullopt, 2).slice(2, o[1], c10::nullopt, 2).slice(3, o[2], c10::nullopt, 2));
  return reduction(norm(torch::cat(parts, -1)));
}

BasicLayerImpl::BasicLayerImpl(int64_t dim, int64_t depth, int64_t heads, const Size3& ws, double mlp_ratio,
                               bool qkv_bias, const std::string& downsample_mode)
    : window_size(ws), shift_size{ws[0] / 2, ws[1] / 2, ws[2] / 2} {
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < depth; ++i)
    blocks->push_back(SwinTransformerBlock(dim, heads, ws, i % 2 == 0 ? Size3{0, 0, 0} : shift_size, mlp_ratio, qkv_bias));
  // MONAI merges after every stage, the last one included (unlike the original Swin).
  downsample = register_module("downsample", PatchMerging(dim, downsample_mode));
}

torch::Tensor BasicLayerImpl::shift_mask(const Size3& padded, const Size3& ws, const Size3& ss,
                                         const torch::Device& device, c10::ScalarType dtype) {
  std::vector<int64_t> key{padded[0], padded[1], padded[2], ws[0],  ws[1], ws[2], ss[0], ss[1], ss[2],
                           static_cast<int64_t>(device.type()), device.index(), static_cast<int64_t>(dtype)};
  std::lock_guard<std::mutex> lock(mask_cache_->mu);
  if (mask_cache_->key != key) {
    mask_cache_->mask = torch::Tensor();  // release the old one before building the new
    mask_cache_->mask = compute_mask(padded, ws, ss, device).to(dtype);
    mask_cache_->key = std::move(key);
  }
  return mask_cache_->mask;
}

torch::Tensor BasicLayerImpl::forward(const torch::Tensor& x_in) {
  const int64_t b = x_in.size(0), d = x_in.size(2), h = x_in.size(3), w = x_in.size(4);
  const auto [ws, ss] = get_window_size({d, h, w}, window_size, shift_size);
  auto x = x_in.permute({0, 2, 3, 4, 1});  // b c d h w -> b d h w c
  torch::Tensor mask;
  if (any_positive(ss)) {
    const Size3 padded{(d + ws[0] - 1) / ws[0] * ws[0], (h + ws[1] - 1) / ws[1] * ws[1], (w + ws[2] - 1) / ws[2] * ws[2]};
    mask = shift_mask(padded, ws, ss, x.device(), x.scalar_type());
  }
  for (const auto& blk : *blocks) x = blk->as<SwinTransformerBlock>()->forward(x, mask);
  x = downsample(x.reshape({b, d, h, w, -1}));
  return x.permute({0, 4, 1, 2, 3});  // b d h w c -> b c d h w
}

SwinTransformerImpl::SwinTransformerImpl(const SwinUNETRConfig& c) : patch_size(c.patch_size), use_v2(c.use_v2) {
  auto patch_embed = register_module("patch_embed", std::make_shared<torch::nn::Module>());
  patch_embed_proj = patch_embed->register_module(
      "proj", torch::nn::Conv3d(torch::nn::Conv3dOptions(c.in_channels, c.feature_size, c.patch_size).stride(c.patch_size)));
  // MONAI's PatchEmbed(norm_layer=nn.LayerNorm) when patch_norm: LayerNorm over channels, default eps.
  if (c.patch_norm)
    patch_embed_norm = patch_embed->register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.feature_size})));
  const Size3 ws{c.window_size, c.window_size, c.window_size};
  for (int i = 0; i < 4; ++i) {
    const int64_t dim = c.feature_size << i;
    if (c.use_v2) {
      layers_c[i] = register_module("layers" + std::to_string(i + 1) + "c", torch::nn::ModuleList());
      layers_c[i]->push_back(UnetrBasicBlock(dim, dim));
    }
    layers[i] = register_module("layers" + std::to_string(i + 1), torch::nn::ModuleList());
    layers[i]->push_back(BasicLayer(dim, c.depths[i], c.num_heads[i], ws, c.mlp_ratio, c.qkv_bias, c.downsample));
  }
}

std::vector<torch::Tensor> SwinTransformerImpl::forward(const torch::Tensor& x_in, bool normalize) {
  TORCH_CHECK(x_in.dim() == 5, "SwinTransformer: input must be [B, C, D, H, W], got ", x_in.sizes());
  // MONAI PatchEmbed pads each spatial dim at its end to a multiple of the patch.
  std::vector<int64_t> pad;
  for (int dim = 4; dim >= 2; --dim) {
    pad.push_back(0);
    pad.push_back((patch_size - x_in.size(dim) % patch_size) % patch_size);
  }
  auto x = patch_embed_proj(torch::constant_pad_nd(x_in, pad, 0));
  if (patch_embed_norm) x = patch_embed_norm(x.permute({0, 2, 3, 4, 1})).permute({0, 4, 1, 2, 3});
  std::vector<torch::Tensor> out{proj_out(x, normalize)};
  for (int i = 0; i < 4; ++i) {
    if (use_v2) x = layers_c[i][0]->as<UnetrBasicBlock>()->forward(x.contiguous());
    x = layers[i][0]->as<BasicLayer>()->forward(x.contiguous());
    out.push_back(proj_out(x, normalize));
  }
  return out;
}

}  // namespace tessera::models
