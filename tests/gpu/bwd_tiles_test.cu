// Host-only check (no GPU needed): the Hopper kernels' tile orders. bwd_tile_coords (the backward,
// attention/cuda/bwd_sm90_kernel.cuh) numbers every (key block, kv head, sequence) of a launch exactly
// once: by default key blocks fastest (consecutive tiles share a head); with a chunk G > 0 (chunked_order,
// kernel_args.cuh; the causal setting Overrides::causal_chunk, also used by the forward) key
// blocks count slowest within each chunk of G heads, so a chunk's tiles stay within its heads and every
// rank r tile of a chunk comes before any rank r + 1 tile. With S GQA head splits, every (key block, split,
// kv head, sequence) once, a kv head's S splits as consecutive heads.
#include <cstdio>
#include <vector>

#include "cuda/kernels/sm90/bwd_sm90_kernel.cuh"

using namespace tessera::attention::cuda;

int check(int nkb, int heads_kv, int batch, int chunk, int splits) {
  int bad = 0;
  const int n = nkb * heads_kv * batch * splits;
  std::vector<int> seen(n, 0);
  int prev_kb = -1, prev_chunk = -1;
  for (int t = 0; t < n; ++t) {
    const sm90::BwdTileCoords c = sm90::bwd_tile_coords(t, nkb, heads_kv, batch, chunk, splits);
    if (c.kb < 0 || c.kb >= nkb || c.hk < 0 || c.hk >= heads_kv || c.b < 0 || c.b >= batch || c.split < 0 ||
        c.split >= splits) {
      if (bad++ == 0)
        std::printf("tile %d of %d x %d x %d x %d: (%d, %d, %d, %d) out of range\n", t, nkb, heads_kv, batch, splits, c.kb,
                    c.hk, c.b, c.split);
      continue;
    }
    const int head = (c.b * heads_kv + c.hk) * splits + c.split;
    ++seen[head * nkb + c.kb];
    bool order_ok;
    if (chunk <= 0) {
      order_ok = c.kb == t % nkb && head == t / nkb;
    } else {
      const int ch = head / chunk;  // the chunk of this tile's head: chunks run in order, ranks rise within one
      order_ok = ch == t / (chunk * nkb) && (ch != prev_chunk || c.kb >= prev_kb);
      prev_chunk = ch;
    }
    if (!order_ok && bad++ == 0)
      std::printf("tile %d of %d x %d x %d (chunk %d): key block %d of head %d out of order\n", t, nkb, heads_kv,
                  batch, chunk, c.kb, head);
    prev_kb = c.kb;
  }
  for (int s : seen) bad += s != 1;
  return bad;
}

int main() {
  int bad = 0;
  for (int chunk : {0, 1, 3, 8, 16, 100})
    for (int nkb : {1, 3, 32, 64})
      for (int hkv : {1, 2, 8})
        for (int batch : {1, 4, 5})
          for (int splits : {1, 2, 8}) bad += check(nkb, hkv, batch, chunk, splits);
  std::printf("%d passed, %d failed\n", bad == 0 ? 1 : 0, bad == 0 ? 0 : 1);
  return bad == 0 ? 0 : 1;
}
