#pragma once
// A tensor that holds only its own bytes: a pooled class token is a view of the whole token sequence, and
// every kept view would keep its sequence alive on the device.
#include <torch/torch.h>

namespace tessera::apps {

inline torch::Tensor own_storage(const torch::Tensor& t) {
  return t.storage().nbytes() > t.nbytes() ? t.clone(torch::MemoryFormat::Contiguous) : t;
}

}  // namespace tessera::apps
