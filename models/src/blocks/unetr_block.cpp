#include "tessera/models/unetr_block.h"

#include <torch/torch.h>

#include "tessera/models/instance_norm.h"

namespace tessera::models {
namespace {

constexpr double kSlope = 0.01;  // MONAI's LeakyReLU default in UnetResBlock

}  // namespace

ConvolutionImpl::ConvolutionImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride, bool bias, bool transposed) {
  if (transposed) {
    // MONAI get_padding/get_output_padding give 0/0 for kernel == stride.
    TORCH_CHECK(kernel == stride, "Convolution: transposed convs are only used with kernel == stride here");
    transp = register_module(
        "conv", torch::nn::ConvTranspose3d(torch::nn::ConvTranspose3dOptions(in, out, kernel).stride(stride).bias(bias)));
  } else {
    // MONAI get_padding: (kernel - stride + 1) / 2, i.e. "same" for stride 1.
    const int64_t pad = (kernel - stride + 1) / 2;
    conv = register_module(
        "conv", torch::nn::Conv3d(torch::nn::Conv3dOptions(in, out, kernel).stride(stride).padding(pad).bias(bias)));
  }
}

torch::Tensor ConvolutionImpl::forward(const torch::Tensor& x) { return transp ? transp(x) : conv(x); }

UnetResBlockImpl::UnetResBlockImpl(int64_t in, int64_t out, int64_t k) {
  conv1 = register_module("conv1", Convolution(in, out, k, 1, false, false));
  conv2 = register_module("conv2", Convolution(out, out, k, 1, false, false));
  if (in != out) conv3 = register_module("conv3", Convolution(in, out, 1, 1, false, false));
}

torch::Tensor UnetResBlockImpl::forward(const torch::Tensor& x) {
  // MONAI: lrelu(IN(conv2(lrelu(IN(conv1(x))))) + (conv3 ? IN(conv3(x)) : x)), normalisations fused with what follows.
  const auto out = instance_norm_act(conv1(x), {}, false, kSlope);
  return conv3 ? instance_norm_act(conv2(out), conv3(x), true, kSlope) : instance_norm_act(conv2(out), x, false, kSlope);
}

UnetrBasicBlockImpl::UnetrBasicBlockImpl(int64_t in, int64_t out) {
  layer = register_module("layer", UnetResBlock(in, out));
}

UnetrUpBlockImpl::UnetrUpBlockImpl(int64_t in, int64_t out) {
  transp_conv = register_module("transp_conv", Convolution(in, out, 2, 2, false, true));
  conv_block = register_module("conv_block", UnetResBlock(2 * out, out));
}

torch::Tensor UnetrUpBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& skip) {
  return conv_block(torch::cat({transp_conv(x), skip}, 1));
}

UnetOutBlockImpl::UnetOutBlockImpl(int64_t in, int64_t out) {
  conv = register_module("conv", Convolution(in, out, 1, 1, true, false));
}

}  // namespace tessera::models
