// Host-side fp16 / bf16 <-> fp32 conversions (round to nearest even), and
// loading any supported element type as float.
#pragma once

#include <cstdint>
#include <cstring>

#include "tessera/attention/params.h"

namespace tessera::attention {

inline float bf16_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) { mant <<= 1; --exp; }
      bits = sign | (exp << 23) | ((mant & 0x3FFu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t absb = bits & 0x7FFFFFFFu;
  if (absb >= 0x7F800000u) return sign | (absb > 0x7F800000u ? 0x7E00u : 0x7C00u);
  if (absb >= 0x477FF000u) return sign | 0x7C00u;  // rounds to >= 65520: inf
  if (absb < 0x38800000u) {                         // below the smallest normal: subnormal or 0
    if (absb < 0x33000000u) return sign;
    const uint32_t mant = (absb & 0x7FFFFFu) | 0x800000u;
    const int shift = 126 - static_cast<int>(absb >> 23);  // 14..24
    const uint32_t half = 1u << (shift - 1 + 0);
    uint32_t r = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = absb - 0x38000000u;  // rebias exponent 127 -> 15
  r += 0xFFFu + ((r >> 13) & 1u);
  return sign | static_cast<uint16_t>(r >> 13);
}

inline float load_as_float(const void* base, int64_t idx, DType t) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(base)[idx];
    case DType::f16: return f16_to_float(static_cast<const uint16_t*>(base)[idx]);
    case DType::bf16: return bf16_to_float(static_cast<const uint16_t*>(base)[idx]);
  }
  return 0.f;
}

inline void store_from_float(void* base, int64_t idx, DType t, float v) {
  switch (t) {
    case DType::f32: static_cast<float*>(base)[idx] = v; break;
    case DType::f16: static_cast<uint16_t*>(base)[idx] = float_to_f16(v); break;
    case DType::bf16: static_cast<uint16_t*>(base)[idx] = float_to_bf16(v); break;
  }
}

}  // namespace tessera::attention
