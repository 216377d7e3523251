#include "tessera/models/linear.h"

#include <torch/nn/init.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

namespace tessera::models {
namespace {

thread_local std::optional<c10::TensorOptions> to_be_loaded;

}  // namespace

ParametersToBeLoaded::ParametersToBeLoaded(c10::ScalarType dtype, c10::Device device) : outer_(to_be_loaded) {
  to_be_loaded = c10::TensorOptions().dtype(dtype).device(device);
}
ParametersToBeLoaded::~ParametersToBeLoaded() { to_be_loaded = outer_; }
std::optional<c10::TensorOptions> ParametersToBeLoaded::active() { return to_be_loaded; }

LinearImpl::LinearImpl(const torch::nn::LinearOptions& options_) : options(options_) { reset(); }

void LinearImpl::reset() {
  const auto loaded = ParametersToBeLoaded::active();
  const auto make = [&](at::IntArrayRef shape) {
    return loaded ? torch::full(shape, std::numeric_limits<double>::quiet_NaN(), *loaded) : torch::empty(shape);
  };
  weight = register_parameter("weight", make({options.out_features(), options.in_features()}));
  if (options.bias()) bias = register_parameter("bias", make({options.out_features()}));
  else bias = register_parameter("bias", {}, /*requires_grad=*/false);
  if (!loaded) reset_parameters();
}

void LinearImpl::reset_parameters() {
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(options.in_features()));
    torch::nn::init::uniform_(bias, -bound, bound);
  }
}

void LinearImpl::pretty_print(std::ostream& stream) const {
  stream << "tessera::models::Linear(in_features=" << options.in_features() << ", out_features=" << options.out_features()
         << ", bias=" << options.bias() << ")";
}

}  // namespace tessera::models
