// MONAI's UNETR decoder blocks (monai/networks/blocks/unetr_block.py and
// dynunet_block.py) as SwinUNETR uses them: res_block=True, instance norm
// (InstanceNorm3d, affine=False: no state), LeakyReLU(0.01), bias-free
// convolutions. Names match MONAI: <block>.layer.conv{1,2,3}.conv,
// <block>.transp_conv.conv, <block>.conv_block.conv{1,2,3}.conv, out.conv.conv.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>

namespace tessera::models {

// MONAI's Convolution(conv_only=True): a module whose only child is `conv`.
class ConvolutionImpl : public torch::nn::Module {
 public:
  ConvolutionImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride, bool bias, bool transposed);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Conv3d conv{nullptr};
  torch::nn::ConvTranspose3d transp{nullptr};  // registered as `conv` when transposed
};
TORCH_MODULE(Convolution);

// conv1 -> IN -> lrelu -> conv2 -> IN, plus the residual (through conv3 + IN
// when the channel count changes), then lrelu.
class UnetResBlockImpl : public torch::nn::Module {
 public:
  UnetResBlockImpl(int64_t in, int64_t out, int64_t kernel_size = 3);
  torch::Tensor forward(const torch::Tensor& x);
  Convolution conv1{nullptr}, conv2{nullptr}, conv3{nullptr};  // conv3 only when in != out
};
TORCH_MODULE(UnetResBlock);

class UnetrBasicBlockImpl : public torch::nn::Module {
 public:
  UnetrBasicBlockImpl(int64_t in, int64_t out);
  torch::Tensor forward(const torch::Tensor& x) { return layer(x); }
  UnetResBlock layer{nullptr};
};
TORCH_MODULE(UnetrBasicBlock);

// transp_conv (k=2, s=2) up-samples, the skip is concatenated after it, then conv_block.
class UnetrUpBlockImpl : public torch::nn::Module {
 public:
  UnetrUpBlockImpl(int64_t in, int64_t out);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& skip);
  Convolution transp_conv{nullptr};
  UnetResBlock conv_block{nullptr};
};
TORCH_MODULE(UnetrUpBlock);

class UnetOutBlockImpl : public torch::nn::Module {  // 1x1x1 conv with bias
 public:
  UnetOutBlockImpl(int64_t in, int64_t out);
  torch::Tensor forward(const torch::Tensor& x) { return conv(x); }
  Convolution conv{nullptr};
};
TORCH_MODULE(UnetOutBlock);

}  // namespace tessera::models
