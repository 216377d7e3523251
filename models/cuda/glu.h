// A packed gated linear unit, fused (plain CUDA, no LibTorch; models/src/blocks/fused_layers.cpp binds it):
//
//   out[r, j] = act(h[r, j]) · h[r, hidden + j]     h: [rows, 2·hidden], out: [rows, hidden]
//
// timm's SwiGLUPacked (GluMlp, gate first) after fc1: one read of h and one write of out instead of the
// activation's and the product's passes; computed in fp32, rounded once.
#pragma once

#include <cstdint>

#include "dtype.h"

namespace tessera::models::cuda {

enum class GluAct { silu, gelu };  // gelu: the erf form (torch's default)

struct GluArgs {
  DType dtype = DType::f32;
  GluAct act = GluAct::silu;
  const void* h = nullptr;  // [rows, 2 * hidden], contiguous
  void* out = nullptr;      // [rows, hidden], contiguous
  int64_t rows = 0, hidden = 0;
  void* stream = nullptr;  // cudaStream_t
};

// Launches on `stream`; throws std::runtime_error if the launch fails.
void packed_glu(const GluArgs& args);

}  // namespace tessera::models::cuda
