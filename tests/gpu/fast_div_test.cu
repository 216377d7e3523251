// Host-only check (no GPU needed): FastDiv (attention/cuda/fast_div.cuh) against / and % for every
// divisor up to 4096 and large ones, at the edges of each quotient and at random x in [0, 2^31).
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda/primitives/fast_div.cuh"

using tessera::attention::cuda::FastDiv;

int main() {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<uint32_t> any_x(0, 0x7fffffffu), any_d(1, 0x7fffffffu);
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (int i = 0; i < 2000; ++i) divisors.push_back(any_d(rng));
  divisors.push_back(0x7fffffffu);
  divisors.push_back(0x40000000u);
  long bad = 0, checked = 0;
  for (const uint32_t d : divisors) {
    const FastDiv f = FastDiv::make(d);
    std::vector<uint32_t> xs = {0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, 0x7fffffffu, 0x7ffffffeu};
    for (int i = 0; i < 64; ++i) xs.push_back(any_x(rng));
    for (uint32_t q = 1; q < 64 && uint64_t(q) * d < 0x80000000u; ++q) {  // around the first quotients' edges
      xs.push_back(q * d - 1);
      xs.push_back(q * d);
    }
    for (const uint32_t x : xs) {
      if (x >= 0x80000000u) continue;
      ++checked;
      if (f.div(x) != x / d || f.mod(x) != x % d) {
        if (bad++ < 5) std::printf("FastDiv(%u): x %u gives %u r %u, not %u r %u\n", d, x, f.div(x), f.mod(x), x / d, x % d);
      }
    }
  }
  std::printf("fast_div: %ld cases, %ld wrong\n", checked, bad);
  return bad == 0 ? 0 : 1;
}
