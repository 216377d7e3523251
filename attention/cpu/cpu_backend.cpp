// Picks the widest instruction set this processor runs and the thread count.
#include "cpu/cpu_backend.h"

#include <omp.h>

namespace tessera::attention::cpu {

#define TESSERA_DECLARE_ISA(ns)                          \
  namespace ns {                                         \
  void forward(const AttentionParams& p, int threads);   \
  void backward(const AttentionParams& p, int threads);  \
  }
TESSERA_DECLARE_ISA(avx512)
TESSERA_DECLARE_ISA(avx2)
TESSERA_DECLARE_ISA(generic)
#undef TESSERA_DECLARE_ISA

namespace {

enum class Isa { avx512, avx2, generic };

Isa detect() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    return Isa::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::avx2;
  return Isa::generic;
}

Isa isa() {
  static const Isa chosen = detect();
  return chosen;
}

int thread_count(const AttentionParams& p) { return p.num_threads > 0 ? p.num_threads : omp_get_max_threads(); }

}  // namespace

const char* isa_name() {
  switch (isa()) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    default: return "generic";
  }
}

void forward(const AttentionParams& p) {
  switch (isa()) {
    case Isa::avx512: return avx512::forward(p, thread_count(p));
    case Isa::avx2: return avx2::forward(p, thread_count(p));
    default: return generic::forward(p, thread_count(p));
  }
}

void backward(const AttentionParams& p) {
  switch (isa()) {
    case Isa::avx512: return avx512::backward(p, thread_count(p));
    case Isa::avx2: return avx2::backward(p, thread_count(p));
    default: return generic::backward(p, thread_count(p));
  }
}

}  // namespace tessera::attention::cpu
