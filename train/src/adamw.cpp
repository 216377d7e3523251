#include "tessera/train/adamw.h"

#include <cmath>
#include <stdexcept>

namespace tessera::train {

AdamW::AdamW(std::vector<at::Tensor> params, const OptimConfig& config) : params_(std::move(params)), c_(config) {
  for (const auto& p : params_) {
    if (p.scalar_type() != at::kFloat) throw std::invalid_argument("AdamW: master weights must be float32");
    m_.push_back(at::zeros_like(p));
    v_.push_back(at::zeros_like(p));
  }
}

void AdamW::step(const std::vector<at::Tensor>& grads, double lr) {
  if (grads.size() != params_.size()) throw std::invalid_argument("AdamW::step: gradient count differs from parameters");
  ++t_;
  const double bc1 = 1 - std::pow(c_.beta1, double(t_)), bc2 = 1 - std::pow(c_.beta2, double(t_));
  const double step_size = lr / bc1, bc2_sqrt = std::sqrt(bc2);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!grads[i].defined()) continue;  // a parameter the loss does not reach
    const at::Tensor g = grads[i].to(at::kFloat);
    at::Tensor& p = params_[i];
    p.mul_(1 - lr * c_.weight_decay);
    m_[i].mul_(c_.beta1).add_(g, 1 - c_.beta1);
    v_[i].mul_(c_.beta2).addcmul_(g, g, 1 - c_.beta2);
    const at::Tensor denom = (v_[i].sqrt() / bc2_sqrt).add_(c_.eps);
    p.addcdiv_(m_[i], denom, -step_size);
  }
}

double lr_at(const OptimConfig& c, int64_t step) {
  if (step < c.warmup_steps) return c.lr * double(step + 1) / double(c.warmup_steps);
  const double span = double(std::max<int64_t>(1, c.steps - c.warmup_steps));
  const double t = std::min(1.0, double(step - c.warmup_steps) / span);
  const double pi = 3.14159265358979323846;
  return c.min_lr + 0.5 * (c.lr - c.min_lr) * (1 + std::cos(pi * t));
}

double clip_grad_norm(std::vector<at::Tensor>& grads, double max_norm) {
  at::Tensor sq;
  for (const auto& g : grads) {
    if (!g.defined()) continue;
    const at::Tensor s = g.to(at::kFloat).pow(2).sum();
    sq = sq.defined() ? sq + s : s;
  }
  if (!sq.defined()) return 0;
  const double norm = std::sqrt(sq.item<double>());
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm) {
    const double f = max_norm / (norm + 1e-6);
    for (auto& g : grads)
      if (g.defined()) g.mul_(f);
  }
  return norm;
}

}  // namespace tessera::train
