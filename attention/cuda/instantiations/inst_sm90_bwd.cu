// Launches of the Hopper backward for fp16 / bf16 at the 64 and 128 head-dim
// buckets, with the TMA tensor maps of Q, K, V and dO: one warpgroup per 64
// keys, two CTAs per SM (bwd_sm90_wg_kernel.cuh) on short rows; otherwise the
// warp-specialised kernel (bwd_sm90_ws_kernel.cuh) at d65..128 and the
// two-warpgroup kernel (bwd_sm90_kernel.cuh) at d64 and in the deterministic
// mode (sm90_bwd_kernel).
// Like inst_sm90.cu: compiled for every architecture, launched only on
// compute 9.0 from a build with the sm_90a image (sm90_eligible).
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/sm90/bwd_sm90_kernel.cuh"
#include "kernels/sm90/bwd_sm90_wg_kernel.cuh"
#include "kernels/sm90/bwd_sm90_ws_kernel.cuh"
#include "cuda_backend.h"  // set_sm90_backward
#include "launch_impl.cuh"
#include "launch_sm90.cuh"  // sm_count
#include "primitives/tensor_map.cuh"

namespace tessera::attention::cuda {
namespace {

// Each tile walks its query blocks from a rotated start (BwdTile): on the H200, 1-2 % off the pair kernel
// at d128 N1k-8k and d64 N8k (bench/CUDA_NOTES.md "Tiles"); TESSERA_CUDA_BWD90_ROT=0 turns it off (A / B).
bool bwd90_rotate() {
  static const bool on = !env_is("TESSERA_CUDA_BWD90_ROT", "0");
  return on;
}

// Causal calls on the warp-specialised kernel number their tiles heaviest first within chunks of 8 (kv head,
// sequence) pairs (chunked_order), so the last heads' heavy tiles do not run on alone at the launch's end.
// Measured on the H200 (attention_cuda_bench, same binary, alternating, bf16, bwd ms; bench/CUDA_NOTES.md
// "The prepared items run"): d128 causal N2k 0.856 -> 0.83, N4k 1.47 -> 1.38-1.43, N8k 2.59-2.72 -> 2.58-2.66, GQA
// 32/8 N4k 3.00-3.08 -> 2.83-2.84, d64 causal N4k 1.665 -> 1.625; but d128 causal N16k 4.97-5.09 -> 5.15-5.25:
// the 8 heads at work together then read 8 x 8 MB of Q / dO, more than the 50 MB L2. So rows whose Q and
// dO take at most 4 MB per head (keys x head dim <= 8192 x 128); TESSERA_CUDA_CAUSAL_CHUNK=G forces G.
int ws_causal_chunk(const KArgs& a) {
  if (a.causal_chunk >= 0) return a.causal_chunk;
  const AttentionParams& p = a.p;
  return p.causal && int64_t{p.seqlen_k} * p.head_dim <= int64_t{8192} * 128 ? 8 : 0;
}

template <typename Tr, Bwd90 KIND>
void launch_cfg(const KArgs& a, cudaStream_t st) {
  const AttentionParams& p = a.p;
  sm90::BwdMaps maps;
  maps.q = map_q(p, Tr::BM);
  maps.dout = map_dout(p, Tr::BM);
  maps.k = map_k(p, Tr::BN);
  maps.v = map_v(p, Tr::BN);
  if (a.dq_accum) {
    const int64_t rows = p.cu_seqlens_q ? p.total_q : static_cast<int64_t>(p.batch) * p.seqlen_q;
    maps.dq = map_dq_accum(a.dq_accum, a.dq_accum_d, p.heads_q, rows);
  }
  // dK / dV by TMA stores of 64-row boxes, except varlen (a box would run into the next sequence)
  maps.kv_store = p.cu_seqlens_q == nullptr && p.cu_seqlens_k == nullptr;
  if (maps.kv_store) {
    maps.dk = map_dk(p, 64);
    maps.dv = map_dv(p, 64);
  }
  const int nkb = (p.seqlen_k + Tr::BN - 1) / Tr::BN;
  // the pair and warp-specialised kernels number tiles key block fastest, then kv head, then sequence
  const int64_t tiles = static_cast<int64_t>(nkb) * p.heads_kv * p.batch;
  if (KIND != Bwd90::one_wg && tiles > INT32_MAX)
    throw std::invalid_argument("sm90 backward: more than 2^31 key blocks");
  if constexpr (KIND == Bwd90::one_wg) {
    auto kernel = sm90::bwd_sm90_wg_kernel<typename Tr::Elt, Tr>;
    set_smem(kernel, Tr::kSmem);
    kernel<<<dim3(nkb, p.heads_kv, p.batch), Tr::NTHREADS, Tr::kSmem, st>>>(a, maps);
  } else if constexpr (KIND == Bwd90::ws) {
    using Ws = sm90::BwdSm90WsTraits<typename Tr::Elt, Tr::D, Tr::BM>;
    auto kernel = sm90::bwd_sm90_ws_kernel<typename Tr::Elt, Ws>;
    set_smem(kernel, Ws::kSmem);
    KArgs wa = a;
    wa.causal_chunk = ws_causal_chunk(a);
    kernel<<<static_cast<unsigned>(tiles), Ws::NTHREADS, Ws::kSmem, st>>>(wa, maps, bwd90_rotate() ? 1 : 0);
  } else {  // the pair: one CTA per tile, or persistent, one per SM
    const int64_t ctas = KIND == Bwd90::persist ? std::min<int64_t>(tiles, sm_count()) : tiles;
    auto kernel = sm90::bwd_sm90_kernel<typename Tr::Elt, Tr>;
    set_smem(kernel, Tr::kSmem);
    kernel<<<static_cast<unsigned>(ctas), Tr::NTHREADS, Tr::kSmem, st>>>(a, maps, static_cast<int>(tiles),
                                                                          bwd90_rotate() ? 1 : 0);
  }
  check_cuda(cudaGetLastError(), "sm90 backward launch");
}

}  // namespace

// Measured on the H200 (attention_cuda_bench, same binary, alternating, bf16; bench/CUDA_NOTES.md "One
// warpgroup per 64 keys"): the one-warpgroup kernel wins only on short rows, where the pair runs one CTA
// per SM through a few query blocks with its prologue and epilogue exposed: ViT's 197 tokens at d64
// 0.693 ms against 0.725, causal N512 d64 0.541 / 0.565 and d128 0.473 / 0.484. On longer rows every
// 64-key CTA loads all of Q / dO and reduce-adds a full dQ partial, twice the pair's L2 traffic: d64 N512
// 0.72 against 0.66 ms, N1k 1.18 / 1.00, d128 N8k 7.2 / 5.5. So: d64 rows of at most 208 keys (the
// forward's one-block bucket, inst_sm90.cu) and causal rows of at most 512 keys.
// The persistent grid (persist) is not the default: with the next tile's K / V / first block loaded while
// the current one ends, it ties one CTA per tile on dense rows (d128 N1k 0.810 against 0.811 ms, N8k 5.04
// against 5.05) and loses 15-25 % on causal ones, whose tiles differ in work (a static round robin
// against the hardware's dynamic one).
// The warp-specialised kernel (ws) against the pair at d128 (same binary, alternating): N1k 0.786-0.789
// against 0.818-0.819 ms, N8k 4.57-4.68 / 4.97-5.09, causal N8k 2.56-2.58 / 2.73-2.78, GQA 32/8 causal N4k
// 2.97-2.98 / 3.10-3.20; its first build (per-consumer dQ halves) lost 1-2 % to the pair at d64
// (bench/CUDA_NOTES.md, "A producer warpgroup for the backward").
namespace {
Bwd90 bwd90_named(const char* e) {
  if (!e) return Bwd90::none;
  if (std::strcmp(e, "wg") == 0) return Bwd90::one_wg;
  if (std::strcmp(e, "pair") == 0) return Bwd90::pair;
  if (std::strcmp(e, "persist") == 0) return Bwd90::persist;
  if (std::strcmp(e, "ws") == 0) return Bwd90::ws;
  return Bwd90::none;
}
std::atomic<int> g_bwd90_set{static_cast<int>(Bwd90::none)};  // set_sm90_backward
}  // namespace

void set_sm90_backward(const char* kernel) {
  const Bwd90 k = bwd90_named(kernel);
  if (kernel && k == Bwd90::none)
    throw std::invalid_argument(std::string("set_sm90_backward: unknown kernel '") + kernel +
                                "' (pair, wg, persist or ws)");
  g_bwd90_set.store(static_cast<int>(k));
}

Bwd90 sm90_bwd_kernel(int d, int seqlen_k, bool causal, bool dq_accum) {
  // TESSERA_CUDA_BWD90=wg / pair / persist / ws forces a kernel (A / B), as set_sm90_backward does (tests)
  static const Bwd90 env = bwd90_named(std::getenv("TESSERA_CUDA_BWD90"));
  if (!dq_accum) return Bwd90::pair;  // the deterministic mode: dK / dV only, the pair kernel
  const Bwd90 set = static_cast<Bwd90>(g_bwd90_set.load());
  if (set != Bwd90::none) return set;
  if (env != Bwd90::none) return env;
  if ((d <= 64 && seqlen_k <= 208) || (causal && seqlen_k <= 512)) return Bwd90::one_wg;
  // d64 causal N1k: the pair 0.68 ms, ws 0.69-0.72 (H200, bf16, B16 H32); from N2k ws leads by 1-10 %
  if (d <= 64 && causal && seqlen_k <= 1024) return Bwd90::pair;
  return Bwd90::ws;
}

// The pair kernels: d128 64 queries per step (dQ split by columns), d64 128 (dQ split by rows).
template <typename T, int D>
void launch_bwd_sm90(const KArgs& a, cudaStream_t st) {
  using Pair = sm90::BwdSm90Traits<T, D, D == 64 ? 128 : 64>;
  switch (sm90_bwd_kernel(D, a.p.seqlen_k, a.p.causal, a.dq_accum != nullptr)) {
    case Bwd90::one_wg: launch_cfg<sm90::BwdSm90WgTraits<T, D>, Bwd90::one_wg>(a, st); break;
    case Bwd90::persist: launch_cfg<Pair, Bwd90::persist>(a, st); break;
    case Bwd90::ws: launch_cfg<Pair, Bwd90::ws>(a, st); break;
    default: launch_cfg<Pair, Bwd90::pair>(a, st); break;
  }
}

template void launch_bwd_sm90<__nv_bfloat16, 64>(const KArgs&, cudaStream_t);
template void launch_bwd_sm90<__nv_bfloat16, 128>(const KArgs&, cudaStream_t);
template void launch_bwd_sm90<__half, 64>(const KArgs&, cudaStream_t);
template void launch_bwd_sm90<__half, 128>(const KArgs&, cudaStream_t);

}  // namespace tessera::attention::cuda
