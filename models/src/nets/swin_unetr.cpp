#include "tessera/models/swin_unetr.h"

#include <torch/torch.h>

namespace tessera::models {

SwinUNETRImpl::SwinUNETRImpl(SwinUNETRConfig c) : config_(std::move(c)) {
  config_.validate();
  const int64_t fs = config_.feature_size;
  swinViT = register_module("swinViT", SwinTransformer(config_));
  encoder1 = register_module("encoder1", UnetrBasicBlock(config_.in_channels, fs));
  encoder2 = register_module("encoder2", UnetrBasicBlock(fs, fs));
  encoder3 = register_module("encoder3", UnetrBasicBlock(2 * fs, 2 * fs));
  encoder4 = register_module("encoder4", UnetrBasicBlock(4 * fs, 4 * fs));
  encoder10 = register_module("encoder10", UnetrBasicBlock(16 * fs, 16 * fs));
  decoder5 = register_module("decoder5", UnetrUpBlock(16 * fs, 8 * fs));
  decoder4 = register_module("decoder4", UnetrUpBlock(8 * fs, 4 * fs));
  decoder3 = register_module("decoder3", UnetrUpBlock(4 * fs, 2 * fs));
  decoder2 = register_module("decoder2", UnetrUpBlock(2 * fs, fs));
  decoder1 = register_module("decoder1", UnetrUpBlock(fs, fs));
  out = register_module("out", UnetOutBlock(fs, config_.out_channels));
}

void SwinUNETRImpl::check_input_size(const torch::Tensor& x) const {
  TORCH_CHECK(x.dim() == 5 && x.size(1) == config_.in_channels, "SwinUNETR: input must be [B, ", config_.in_channels,
              ", D, H, W], got ", x.sizes());
  int64_t multiple = 1;
  for (int i = 0; i < 5; ++i) multiple *= config_.patch_size;
  for (int d = 2; d < 5; ++d)
    TORCH_CHECK(x.size(d) % multiple == 0, "SwinUNETR: spatial dimensions ", x.sizes().slice(2),
                " must be divisible by patch_size^5 = ", multiple);
}

std::vector<torch::Tensor> SwinUNETRImpl::hidden_states(const torch::Tensor& x_in) {
  check_input_size(x_in);
  return swinViT(x_in, config_.normalize);
}

torch::Tensor SwinUNETRImpl::forward(const torch::Tensor& x_in) { return decode(x_in, hidden_states(x_in)); }

torch::Tensor SwinUNETRImpl::decode(const torch::Tensor& x_in, const std::vector<torch::Tensor>& hs) {
  TORCH_CHECK(hs.size() == 5, "SwinUNETR: decode needs the 5 hidden states, got ", hs.size());
  const auto enc0 = encoder1(x_in);
  const auto enc1 = encoder2(hs[0]);
  const auto enc2 = encoder3(hs[1]);
  const auto enc3 = encoder4(hs[2]);
  const auto dec4 = encoder10(hs[4]);
  const auto dec3 = decoder5(dec4, hs[3]);  // the raw hidden state, no encoder block (as MONAI)
  const auto dec2 = decoder4(dec3, enc3);
  const auto dec1 = decoder3(dec2, enc2);
  const auto dec0 = decoder2(dec1, enc1);
  return out(decoder1(dec0, enc0));
}

KeyMapping swin_unetr_ssl_key_mapping() {
  return {"", {{"module", "swinViT"}, {"fc1", "linear1"}, {"fc2", "linear2"}}, {}};
}

KeyMapping swin_unetr_research_key_mapping() { return {"module.", {{"swin_vit", "swinViT"}}, {}}; }

}  // namespace tessera::models
