// MONAI's 3-D Swin Transformer encoder (monai/networks/nets/swin_unetr.py,
// MONAI 1.5), with its names: patch_embed.proj, layers{1..4}.0.blocks.{j}.
// {norm1, attn.{relative_position_bias_table, relative_position_index, qkv, proj},
// norm2, mlp.{linear1, linear2}}, layers{i}.0.downsample.{norm, reduction},
// layers{i}c.0 (use_v2).
//
// Window attention runs as ONE call of Tessera's op over all windows of the
// batch: the relative-position bias [H, N, N] and the shifted-window mask
// [nW, 1, N, N] are passed as broadcast terms (window w of image b is batch
// entry b*nW + w, so the op's `batch % nW` picks its mask) and are never
// copied per window.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include "tessera/models/linear.h"
#include <torch/nn/modules/normalization.h>

#include <array>
#include <vector>

#include "tessera/models/config.h"
#include "tessera/models/transformer_layers.h"

namespace tessera::models {

using Size3 = std::array<int64_t, 3>;

// MONAI get_window_size: along a dim no larger than the window, the window
// shrinks to the dim and the shift becomes 0.
std::pair<Size3, Size3> get_window_size(const Size3& x_size, const Size3& window_size, const Size3& shift_size);

// [b, d, h, w, c] -> [b*nW, ws0*ws1*ws2, c], windows batch-major then in (d, h, w) order.
torch::Tensor window_partition(const torch::Tensor& x, const Size3& ws);
// Inverse of window_partition for dims (b, d, h, w).
torch::Tensor window_reverse(const torch::Tensor& windows, const Size3& ws, const std::array<int64_t, 4>& dims);

// MONAI compute_mask for the padded size `dims`: [nW, N, N] with -100 between
// tokens that came from different regions of the rolled volume, 0 elsewhere.
torch::Tensor compute_mask(const Size3& dims, const Size3& window_size, const Size3& shift_size,
                           const torch::Device& device);

// MONAI's relative_position_index for a 3-D window: [N, N] int64.
torch::Tensor relative_position_index_3d(const Size3& window_size);

class WindowAttentionImpl : public torch::nn::Module {
 public:
  WindowAttentionImpl(int64_t dim, int64_t num_heads, const Size3& window_size, bool qkv_bias);
  // x: [B*nW, n, C]; mask: [nW, n, n] or undefined.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);
  // [H, n, n] bias, looked up with MONAI's quirk: the full window's index is
  // sliced to [:n, :n] when the window was clamped to fewer tokens.
  torch::Tensor relative_position_bias(int64_t n) const;

  torch::Tensor relative_position_bias_table, relative_position_index;
  Linear qkv{nullptr}, proj{nullptr};
  int64_t num_heads;
};
TORCH_MODULE(WindowAttention);

class SwinTransformerBlockImpl : public torch::nn::Module {
 public:
  SwinTransformerBlockImpl(int64_t dim, int64_t num_heads, const Size3& window_size, const Size3& shift_size,
                           double mlp_ratio, bool qkv_bias);
  // x: [b, d, h, w, c]; mask_matrix from compute_mask (used when this block shifts).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask_matrix);

  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  WindowAttention attn{nullptr};
  Mlp mlp{nullptr};
  Size3 window_size, shift_size;
};
TORCH_MODULE(SwinTransformerBlock);

// Concatenates the 8 sub-voxels of each 2x2x2 cell along C (in `order`), then
// norm and a bias-free Linear(8C -> 2C). Odd dims are zero-padded at the end.
class PatchMergingImpl : public torch::nn::Module {
 public:
  // mode: "merging" (MONAI 1.5 PatchMerging), "mergingv2", "merging_legacy" (MONAI <= 1.4).
  PatchMergingImpl(int64_t dim, const std::string& mode);
  torch::Tensor forward(const torch::Tensor& x);  // [b, d, h, w, c] -> [b, d/2, h/2, w/2, 2c]
  torch::nn::LayerNorm norm{nullptr};
  Linear reduction{nullptr};
  std::vector<Size3> order;  // (d, h, w) offsets of the 8 sub-voxels, in concatenation order
};
TORCH_MODULE(PatchMerging);

class BasicLayerImpl : public torch::nn::Module {
 public:
  BasicLayerImpl(int64_t dim, int64_t depth, int64_t num_heads, const Size3& window_size, double mlp_ratio,
                 bool qkv_bias, const std::string& downsample);
  torch::Tensor forward(const torch::Tensor& x);  // [b, c, d, h, w] -> [b, 2c, d/2, h/2, w/2]
  torch::nn::ModuleList blocks{nullptr};
  PatchMerging downsample{nullptr};
  Size3 window_size, shift_size;

 private:
  // The shifted-window mask depends on the padded size, device and dtype only: the last one is
  // kept (rebuilding it cost ~140 ms per forward on 2 CPU cores at 96³). Shared, so copies share it.
  struct MaskCache {
    std::mutex mu;
    std::vector<int64_t> key;
    torch::Tensor mask;
  };
  std::shared_ptr<MaskCache> mask_cache_ = std::make_shared<MaskCache>();
  torch::Tensor shift_mask(const Size3& padded, const Size3& ws, const Size3& ss, const torch::Device& device,
                           c10::ScalarType dtype);
};
TORCH_MODULE(BasicLayer);

class UnetrBasicBlockImpl;  // unetr_block.h

class SwinTransformerImpl : public torch::nn::Module {
 public:
  explicit SwinTransformerImpl(const SwinUNETRConfig& c);
  // The five hidden states (patch embedding, then after each stage), each
  // through a non-affine LayerNorm over channels when normalize.
  std::vector<torch::Tensor> forward(const torch::Tensor& x, bool normalize = true);

  torch::nn::Conv3d patch_embed_proj{nullptr};  // registered as patch_embed.proj
  torch::nn::LayerNorm patch_embed_norm{nullptr};  // patch_embed.norm, only with patch_norm
  std::array<torch::nn::ModuleList, 4> layers;   // layers{i}: one BasicLayer
  std::array<torch::nn::ModuleList, 4> layers_c;  // layers{i}c: one UnetrBasicBlock (use_v2)
  int64_t patch_size;
  bool use_v2;
};
TORCH_MODULE(SwinTransformer);

}  // namespace tessera::models
