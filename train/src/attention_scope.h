// Which attention the models use during a training run, restored afterwards
// (the backend is process-wide).
#pragma once

#include <stdexcept>
#include <string>

#include "tessera/models/transformer_layers.h"

namespace tessera::train {

inline models::AttentionBackend attention_backend_named(const std::string& name) {
  if (name == "tessera") return models::AttentionBackend::tessera;
  if (name == "torch_sdpa") return models::AttentionBackend::torch_sdpa;
  if (name == "reference") return models::AttentionBackend::reference_f64;
  throw std::invalid_argument("attention must be tessera, torch_sdpa or reference, got " + name);
}

struct AttentionScope {
  models::AttentionBackend saved = models::attention_backend();
  explicit AttentionScope(const std::string& name) { models::set_attention_backend(attention_backend_named(name)); }
  ~AttentionScope() { models::set_attention_backend(saved); }
};

}  // namespace tessera::train
