// Launches of the Hopper forward (fwd_sm90_kernel.cuh) for fp16 / bf16 at the
// 64 and 128 head-dim buckets (tensor maps and launch: launch_sm90.cuh).
// Compiled for every architecture; the kernel body exists only in the sm_90a
// image, and the dispatcher launches it only when that image was built
// (TESSERA_SM90A) and the device is compute 9.0.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "cuda_backend.h"  // set_sm90_forward
#include "launch_sm90.cuh"

namespace tessera::attention::cuda {

// The shipping tile configurations per head-dim bucket, measured on the H200
// against the alternatives in bench/CUDA_NOTES.md ("Hopper forward", "One
// consumer, several CTAs per SM"); bench/attention_cuda_tune.cu times
// candidates (`attention_cuda_tune fwd90`). d64: one consumer warpgroup that
// issues its own loads (no producer), three 128-thread CTAs per SM, 128-key
// blocks in a 2-deep ring whose K and V halves arrive and refill apart
// (SPLIT_KV); d128: two ping-ponging consumers and a producer in one CTA per SM.
// SPLIT_KV, measured on the H200 (attention_cuda_bench, processes alternating, fwd ms, three passes;
// bench/CUDA_NOTES.md, twenty-second session): N2k 0.613-0.616 -> 0.571-0.573, N4k 1.15-1.18 -> 1.10-1.15,
// N16k 4.82-4.83 -> 4.77-4.83, causal N8k 1.26-1.28 -> 1.20-1.22, N64k (ViT-B slide) 28.5-28.7 -> 28.25-28.28:
// with K and V of a stage refilled together once P_{j-1} V_{j-1} was done, the next block's loads were
// issued ~half a block ahead of their use, and 14 % of the warps' stall samples sat on their arrival.
// 128-key blocks with 64-key last blocks (every other causal tile) also beat a 64-key-block d64 kernel at
// every length (fwd ms, three passes: causal N512 0.139-0.140 -> 0.135-0.136, N2k 0.348-0.352 ->
// 0.336-0.338; dense N1k 0.321-0.325 -> 0.310-0.312), which was dropped (bench/CUDA_NOTES.md, twenty-fourth
// session).
//                                                            D   BN STAGES NCONS PINGPONG MINB PRODUCER PERSIST SPLIT_KV
template <typename T> using Fwd64 = sm90::FwdSm90Traits<T, 64, 128, 2, 1, false, 3, false, false, true>;
template <typename T> using Fwd128 = sm90::FwdSm90Traits<T, 128, 128, 3, 2, true, 1, true>;
// The same, persistent (one CTA per SM walking the tiles; calls: fwd_sm90_persistable): the next tile's
// first key blocks and Q load while one tile ends, where one CTA per tile pays its loads, barrier set-up and
// epilogue with nothing to overlap them (cuDNN's d128 forward is persistent too: bench/CUDA_NOTES.md).
template <typename T> using Fwd128P = sm90::FwdSm90Traits<T, 128, 128, 3, 2, true, 1, true, true>;
// d64 persistent, forced only (TESSERA_CUDA_FWD90=persist, set_sm90_forward): three CTAs per SM walking
// tiles, each consumer loading its next tile's Q and first key blocks at a tile's end. Lost to Fwd64 at every
// length (H200, fwd ms: N2k 0.611-0.618 -> 0.645-0.651, N8k 2.41 -> 2.42-2.47, causal N2k 0.371 -> 0.374-0.377;
// bench/CUDA_NOTES.md "The prepared items run"): three CTAs per SM already hide one CTA's set-up.
template <typename T> using Fwd64P = sm90::FwdSm90Traits<T, 64, 128, 2, 1, false, 3, false, true>;
// d64 rows of 129..208 keys (ViT's 197 tokens, 201 with registers): one 208-key
// block, where 128-key blocks would compute 256 keys.
template <typename T> using Fwd64Row208 = sm90::FwdSm90Traits<T, 64, 208, 1, 1, false, 3, false>;

// Measured on the H200 (attention_cuda_bench, same binary, TESSERA_CUDA_FWD90 alternating, bf16, forward
// ms; bench/CUDA_NOTES.md "A persistent d128 forward", "Causal tiles in pairs"): plain / persistent N512
// 0.161 / 0.138, N1k 0.252 / 0.232, N2k 0.444 / 0.434, N4k 0.883 / 0.865, N8k 1.721 / 1.753; causal N512
// 0.128 / 0.105, N1k 0.175 / 0.152, N2k 0.274 / 0.249, N4k 0.484 / 0.450, N8k 0.862 / 0.873, GQA 32/8
// causal N4k 1.000 / 0.960. So: rows of at most 4096 keys, where each CTA's loads, set-up and epilogue
// are a large share of its work.
namespace {
int fwd90_named(const char* e) { return !e ? 0 : std::strcmp(e, "persist") == 0 ? 1 : std::strcmp(e, "plain") == 0 ? 2 : -1; }
std::atomic<int> g_fwd90_set{0};  // set_sm90_forward: 0 none, 1 persist, 2 plain
}  // namespace

void set_sm90_forward(const char* kernel) {
  const int k = fwd90_named(kernel);
  if (k < 0)
    throw std::invalid_argument(std::string("set_sm90_forward: unknown kernel '") + kernel + "' (persist or plain)");
  g_fwd90_set.store(k);
}

bool sm90_fwd_persistent(int d, const AttentionParams& p) {
  // TESSERA_CUDA_FWD90=persist / plain (A / B) or set_sm90_forward (tests): 1 / 2
  static const int env = std::max(0, fwd90_named(std::getenv("TESSERA_CUDA_FWD90")));
  const int set = g_fwd90_set.load();
  const int forced = set != 0 ? set : env;
  if ((d != 64 && d != 128) || forced == 2 || !fwd_sm90_persistable(p)) return false;
  return forced == 1 || (d == 128 && p.seqlen_k <= 4096);
}

template <typename T, int D>
void launch_fwd_sm90(const KArgs& a, cudaStream_t st) {
  if constexpr (D == 64) {
    if (sm90_fwd_persistent(D, a.p)) launch_fwd_sm90_cfg<Fwd64P<T>>(a, st);
    else if (a.p.seqlen_k > Fwd64<T>::BN && a.p.seqlen_k <= Fwd64Row208<T>::BN) launch_fwd_sm90_cfg<Fwd64Row208<T>>(a, st);
    else launch_fwd_sm90_cfg<Fwd64<T>>(a, st);
  } else {
    if (sm90_fwd_persistent(D, a.p)) launch_fwd_sm90_cfg<Fwd128P<T>>(a, st);
    else launch_fwd_sm90_cfg<Fwd128<T>>(a, st);
  }
}

template void launch_fwd_sm90<__nv_bfloat16, 64>(const KArgs&, cudaStream_t);
template void launch_fwd_sm90<__nv_bfloat16, 128>(const KArgs&, cudaStream_t);
template void launch_fwd_sm90<__half, 64>(const KArgs&, cudaStream_t);
template void launch_fwd_sm90<__half, 128>(const KArgs&, cudaStream_t);

}  // namespace tessera::attention::cuda
