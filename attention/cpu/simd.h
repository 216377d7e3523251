// The vector type of the CPU kernels and the two vector primitives they
// need (unaligned load/store, exp). TESSERA_VW (floats per vector) is set by
// the ISA-specific translation unit that includes this header.
#pragma once

#include <cstdint>
#include <cstring>

#ifndef TESSERA_VW
#error "include through cpu/kernels_<isa>.cpp"
#endif

namespace tessera::attention::cpu::TESSERA_CPU_NS {

constexpr int VW = TESSERA_VW;
typedef float vf __attribute__((vector_size(VW * 4)));
typedef int32_t vi __attribute__((vector_size(VW * 4)));
typedef float vf_unaligned __attribute__((vector_size(VW * 4), aligned(4)));

inline vf loadu(const float* p) { return *reinterpret_cast<const vf_unaligned*>(p); }
inline void storeu(float* p, vf v) { *reinterpret_cast<vf_unaligned*>(p) = v; }
inline vf splat(float x) { return vf{} + x; }

// exp(x) to ~2 ulp (Cephes expf polynomial), exactly 0 below -87.
inline vf vexp(vf x) {
  const vf lo = splat(-87.3f), hi = splat(88.3f);
  const vf xc = x < lo ? lo : (x > hi ? hi : x);
  vf fx = xc * 1.44269504088896341f + 0.5f;
  vi n = __builtin_convertvector(fx, vi);               // truncation
  vf fn = __builtin_convertvector(n, vf);
  const vi adjust = fn > fx;                              // floor for negatives
  n += adjust;                                            // adjust is -1 where true
  fn = __builtin_convertvector(n, vf);
  vf r = xc - fn * 0.693359375f;
  r = r - fn * -2.12194440e-4f;
  vf y = splat(1.9875691500e-4f);
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * (r * r) + r + 1.0f;
  const vi bits = (n + 127) << 23;
  vf scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  const vf out = y * scale;
  return x < lo ? vf{} : out;
}

inline int round_up(int x, int m) { return (x + m - 1) / m * m; }

}  // namespace tessera::attention::cpu::TESSERA_CPU_NS
