// Host-only check (no GPU needed): the Hopper backward's tile order (bwd_tile_coords in
// attention/cuda/bwd_sm90_kernel.cuh) numbers every (key block, kv head, sequence) of a launch exactly
// once, key blocks fastest (consecutive tiles share a head).
#include <cstdio>
#include <vector>

#include "cuda/bwd_sm90_kernel.cuh"

using namespace tessera::attention::cuda;

int check(int nkb, int heads_kv, int batch) {
  int bad = 0;
  const int n = nkb * heads_kv * batch;
  std::vector<int> seen(n, 0);
  for (int t = 0; t < n; ++t) {
    const sm90::BwdTileCoords c = sm90::bwd_tile_coords(t, nkb, heads_kv);
    if (c.kb < 0 || c.kb >= nkb || c.hk < 0 || c.hk >= heads_kv || c.b < 0 || c.b >= batch) {
      if (bad++ == 0) std::printf("tile %d of %d x %d x %d: (%d, %d, %d) out of range\n", t, nkb, heads_kv, batch, c.kb, c.hk, c.b);
      continue;
    }
    ++seen[(c.b * heads_kv + c.hk) * nkb + c.kb];
    if (c.kb != t % nkb && bad++ == 0)
      std::printf("tile %d of %d x %d x %d: key block %d out of order\n", t, nkb, heads_kv, batch, c.kb);
  }
  for (int s : seen) bad += s != 1;
  return bad;
}

int main() {
  int bad = 0;
  for (int nkb : {1, 3, 32, 64})
    for (int hkv : {1, 2, 8})
      for (int batch : {1, 4, 5}) bad += check(nkb, hkv, batch);
  std::printf("%d passed, %d failed\n", bad == 0 ? 1 : 0, bad == 0 ? 0 : 1);
  return bad == 0 ? 0 : 1;
}
