#include "tessera/train/master_weights.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

namespace tessera::train {
namespace {

std::vector<at::Tensor> masters_of(torch::nn::Module& m, torch::ScalarType dtype) {
  std::vector<at::Tensor> out;
  for (const auto& p : m.parameters())  // fp32: the parameters are their own masters
    out.push_back(dtype == torch::kFloat ? p.detach() : p.detach().to(torch::kFloat).clone());
  return out;
}

}  // namespace

torch::ScalarType precision_dtype(const std::string& precision) {
  if (precision == "fp32") return torch::kFloat;
  if (precision == "bf16") return torch::kBFloat16;
  if (precision == "fp16") return torch::kHalf;
  throw std::invalid_argument("precision must be fp32, bf16 or fp16, got " + precision);
}

MasterWeights::MasterWeights(torch::nn::Module& module, torch::ScalarType dtype, const OptimConfig& config)
    : module_(module), dtype_(dtype), config_(config), masters_(masters_of(module, dtype)), adamw_(masters_, config),
      loss_scale_(dtype == torch::kHalf ? 65536.0 : 1.0) {
  for (const auto& kv : module.named_parameters()) {
    names_.push_back(kv.key());
    params_.push_back(kv.value());
  }
  if (dtype != torch::kFloat) {
    // Module::to(dtype) would also cast integer buffers (Swin's relative-position index).
    torch::NoGradGuard ng;
    for (auto& p : params_) p.set_data(p.to(dtype));
    for (auto& b : module.buffers())
      if (b.is_floating_point()) b.set_data(b.to(dtype));
  }
}

at::Tensor MasterWeights::scale(const at::Tensor& loss) const { return loss_scale_ != 1.0 ? loss * loss_scale_ : loss; }

Update MasterWeights::step(double lr, const std::string& where) {
  std::vector<at::Tensor> grads;
  for (auto& p : params_) {
    at::Tensor g = p.grad();
    grads.push_back(g.defined() ? g.to(torch::kFloat) : g);
    if (g.defined()) p.mutable_grad() = at::Tensor();
  }
  if (loss_scale_ != 1.0)
    for (auto& g : grads)
      if (g.defined()) g.div_(loss_scale_);
  Update u;
  u.grad_norm = clip_grad_norm(grads, config_.grad_clip);
  if (!std::isfinite(u.grad_norm)) {
    if (dtype_ != torch::kHalf) throw std::runtime_error(where + ": gradients are not finite (lower optim.lr?)");
    loss_scale_ /= 2;
    good_steps_ = 0;
    u.skipped = true;
    if (loss_scale_ < 1) throw std::runtime_error(where + ": fp16 loss scale underflowed: gradients are not finite");
    return u;
  }
  torch::NoGradGuard ng;
  adamw_.step(grads, lr);
  if (dtype_ != torch::kFloat)
    for (size_t i = 0; i < params_.size(); ++i) params_[i].copy_(masters_[i]);
  if (dtype_ == torch::kHalf && ++good_steps_ % 1000 == 0) loss_scale_ *= 2;
  return u;
}

Checkpoint MasterWeights::checkpoint(int64_t step, uint64_t seed) const {
  Checkpoint ck;
  ck.step = step;
  ck.seed = seed;
  ck.loss_scale = loss_scale_;
  ck.model = weights(torch::kFloat);
  for (size_t i = 0; i < names_.size(); ++i) {
    ck.exp_avg[names_[i]] = adamw_.exp_avg()[i];
    ck.exp_avg_sq[names_[i]] = adamw_.exp_avg_sq()[i];
  }
  return ck;
}

void MasterWeights::restore(const Checkpoint& ck, const std::string& path) {
  torch::NoGradGuard ng;
  auto find = [&](const std::map<std::string, at::Tensor>& m, size_t i, const char* what) -> const at::Tensor& {
    const auto it = m.find(names_[i]);
    if (it == m.end()) throw std::runtime_error(path + ": no " + what + " for parameter " + names_[i]);
    if (it->second.sizes() != masters_[i].sizes())
      throw std::runtime_error(path + ": " + what + " of " + names_[i] + " has another shape than the model's");
    return it->second;
  };
  for (size_t i = 0; i < names_.size(); ++i) {
    masters_[i].copy_(find(ck.model, i, "weights"));
    adamw_.exp_avg()[i].copy_(find(ck.exp_avg, i, "exp_avg"));
    adamw_.exp_avg_sq()[i].copy_(find(ck.exp_avg_sq, i, "exp_avg_sq"));
    if (dtype_ != torch::kFloat) params_[i].copy_(masters_[i]);
  }
  for (const auto& kv : module_.named_buffers()) {
    const auto it = ck.model.find(kv.key());
    if (it != ck.model.end()) kv.value().copy_(it->second);
  }
  adamw_.set_steps_taken(ck.step);
  loss_scale_ = ck.loss_scale;
}

std::map<std::string, at::Tensor> MasterWeights::weights(torch::ScalarType dtype) const {
  std::map<std::string, at::Tensor> w;
  for (size_t i = 0; i < names_.size(); ++i) w[names_[i]] = masters_[i].to(dtype);
  for (const auto& kv : module_.named_buffers())
    w[kv.key()] = kv.value().is_floating_point() ? kv.value().to(dtype) : kv.value();
  return w;
}

int64_t resume_from(const std::string& path, MasterWeights& state, uint64_t seed, int64_t steps) {
  if (path.empty()) return 0;
  const Checkpoint ck = load_checkpoint(path);
  if (ck.seed != seed)
    throw std::runtime_error(path + ": checkpoint was trained with seed " + std::to_string(ck.seed) + ", the config says " +
                             std::to_string(seed));
  if (ck.step > steps) throw std::runtime_error(path + ": checkpoint is past optim.steps");
  state.restore(ck, path);
  return ck.step;
}

}  // namespace tessera::train
