// Moving tiles between strided tensors of any element type and the fp32
// scratch tiles of the CPU kernels. Padding columns are zero-filled so that
// the micro-kernels can run on whole vectors.
#pragma once

#include <cstring>

#include "cpu/simd.h"
#include "tessera/attention/half.h"

namespace tessera::attention::cpu::TESSERA_CPU_NS {

// A [rows, H, D] slice of one sequence: element (r, h, c) at base + r*rs + h*hs + c.
struct Slice {
  const void* base;
  DType dt;
  int64_t rs, hs;
};

inline void convert_row(const void* src, int64_t off, DType dt, int n, float* dst) {
  switch (dt) {
    case DType::f32: std::memcpy(dst, static_cast<const float*>(src) + off, sizeof(float) * n); break;
    case DType::bf16: {
      const uint16_t* s = static_cast<const uint16_t*>(src) + off;
      for (int c = 0; c < n; ++c) dst[c] = bf16_to_float(s[c]);
      break;
    }
    case DType::f16: {
      const uint16_t* s = static_cast<const uint16_t*>(src) + off;
      for (int c = 0; c < n; ++c) dst[c] = f16_to_float(s[c]);
      break;
    }
  }
}

inline void store_row(void* dst, int64_t off, DType dt, int n, const float* src, float mul = 1.f) {
  switch (dt) {
    case DType::f32: {
      float* d = static_cast<float*>(dst) + off;
      for (int c = 0; c < n; ++c) d[c] = src[c] * mul;
      break;
    }
    case DType::bf16: {
      uint16_t* d = static_cast<uint16_t*>(dst) + off;
      for (int c = 0; c < n; ++c) d[c] = float_to_bf16(src[c] * mul);
      break;
    }
    case DType::f16: {
      uint16_t* d = static_cast<uint16_t*>(dst) + off;
      for (int c = 0; c < n; ++c) d[c] = float_to_f16(src[c] * mul);
      break;
    }
  }
}

// dst[r*ld + c] = x[r0 + r, h, c] for r < n, c < d; zero for d <= c < ld.
inline void load_tile(const Slice& x, int r0, int n, int h, int d, float* dst, int ld) {
  for (int r = 0; r < n; ++r) {
    float* row = dst + static_cast<int64_t>(r) * ld;
    convert_row(x.base, (r0 + r) * x.rs + h * x.hs, x.dt, d, row);
    for (int c = d; c < ld; ++c) row[c] = 0.f;
  }
}

// dst[c*ld + r] = x[r0 + r, h, c] for r < n, c < d; zero for n <= r < ld.
// `row` is a scratch row of at least d floats.
inline void load_tile_transposed(const Slice& x, int r0, int n, int h, int d, float* dst, int ld,
                                 float* row) {
  for (int c = 0; c < d; ++c)
    for (int r = n; r < ld; ++r) dst[static_cast<int64_t>(c) * ld + r] = 0.f;
  for (int r = 0; r < n; ++r) {
    convert_row(x.base, (r0 + r) * x.rs + h * x.hs, x.dt, d, row);
    for (int c = 0; c < d; ++c) dst[static_cast<int64_t>(c) * ld + r] = row[c];
  }
}

}  // namespace tessera::attention::cpu::TESSERA_CPU_NS
