// MONAI SwinUNETR (monai/networks/nets/swin_unetr.py, MONAI 1.5; v1 and
// use_v2), 3-D, with MONAI's state_dict names: swinViT.*, encoder{1,2,3,4,10},
// decoder{5,4,3,2,1}, out. A MONAI checkpoint (as safetensors) loads as is.
#pragma once

#include <torch/nn/module.h>

#include "tessera/models/config.h"
#include "tessera/models/state_dict.h"
#include "tessera/models/swin_transformer.h"
#include "tessera/models/unetr_block.h"

namespace tessera::models {

class SwinUNETRImpl : public torch::nn::Module {
 public:
  explicit SwinUNETRImpl(SwinUNETRConfig config);
  // [B, in_channels, D, H, W] -> logits [B, out_channels, D, H, W]; every spatial
  // dim must be divisible by patch_size^5 (32 by default), as MONAI requires.
  torch::Tensor forward(const torch::Tensor& x_in);
  // The encoder's five hidden states for the same input (swinViT(x, normalize)).
  std::vector<torch::Tensor> hidden_states(const torch::Tensor& x_in);
  // The UNet decoder over x_in and its hidden states: forward(x) = decode(x, hidden_states(x)).
  torch::Tensor decode(const torch::Tensor& x_in, const std::vector<torch::Tensor>& hs);
  const SwinUNETRConfig& config() const { return config_; }

  SwinTransformer swinViT{nullptr};
  UnetrBasicBlock encoder1{nullptr}, encoder2{nullptr}, encoder3{nullptr}, encoder4{nullptr}, encoder10{nullptr};
  UnetrUpBlock decoder5{nullptr}, decoder4{nullptr}, decoder3{nullptr}, decoder2{nullptr}, decoder1{nullptr};
  UnetOutBlock out{nullptr};

 private:
  void check_input_size(const torch::Tensor& x) const;
  SwinUNETRConfig config_;
};
TORCH_MODULE(SwinUNETR);

// Key mappings for the published SSL encoder weights into SwinUNETR (load
// non-strictly: they hold the encoder only):
//  - model_swinvit.pt ("module.layers1.0.blocks.0.mlp.fc1.weight"), the
//    mapping of MONAI's SwinUNETR.load_from: module. -> swinViT., fc1/fc2 -> linear1/linear2;
//  - research-contributions BTCV main.py: strip "module.", swin_vit -> swinViT.
KeyMapping swin_unetr_ssl_key_mapping();
KeyMapping swin_unetr_research_key_mapping();

}  // namespace tessera::models
