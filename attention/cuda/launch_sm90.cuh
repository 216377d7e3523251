// Launch of the Hopper forward (fwd_sm90_kernel.cuh) with any FwdSm90Traits,
// with the TMA tensor maps of Q, K and V: launch_sm90_fwd.cu instantiates the
// shipping configurations, bench/attention_cuda_tune.cu times alternatives.
// The kernel body exists only in an sm_90a image (TESSERA_SM90A): launch it
// on compute 9.0 devices only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/sm90/fwd_sm90_kernel.cuh"
#include "launch_impl.cuh"
#include "primitives/tensor_map.cuh"

namespace tessera::attention::cuda {

// The current device's SM count (the persistent grid; a cheap attribute query, no synchronisation).
inline int sm_count() {
  int dev = 0, n = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev), "SM count");
  return n;
}

// The forward with traits Tr = sm90::FwdSm90Traits<T, D, BN, STAGES, NCONS, PINGPONG, ...>:
// Q boxes of Tr::BM rows (one per tile), K / V boxes of Tr::BN rows (one key block).
// tma_store: the epilogue stages O in shared memory and stores it with TMA (fixed-length
// calls); off, or for varlen, each thread stores its own O values.
// A persistent Tr (Tr::PERSIST) launches Tr::MINB CTAs per SM (at most one per tile, causal: per pair).
template <typename Tr>
void launch_fwd_sm90_cfg(const KArgs& a, cudaStream_t st, bool tma_store = true) {
  const AttentionParams& p = a.p;
  if (Tr::ONE_BLOCK && p.seqlen_k > Tr::BN)
    throw std::invalid_argument("sm90 forward: a one-block configuration takes rows of at most " +
                                std::to_string(Tr::BN) + " keys, got " + std::to_string(p.seqlen_k));
  if (Tr::PERSIST && !(fwd90_persistable(p) && tma_store))
    throw std::invalid_argument("sm90 forward: a persistent configuration takes fixed-length calls without "
                                "window masks (causal: as many queries as keys), with keys, and O stored by TMA");
  sm90::FwdMaps maps;
  maps.q = map_q(p, Tr::BM);
  maps.k = map_k(p, Tr::BN);
  maps.v = map_v(p, Tr::BN);
  maps.o_store = tma_store && p.cu_seqlens_q == nullptr;
  maps.half_last = a.fwd_half_last;
  maps.lazy_rescale = a.fwd_lazy_rescale;
  if (maps.o_store) maps.o = map_o(p, 64);
  const int qblocks = (p.seqlen_q + Tr::BM - 1) / Tr::BM;
  dim3 grid(qblocks, p.heads_q, p.batch);
  if constexpr (Tr::PERSIST) {
    const int64_t tiles = static_cast<int64_t>(qblocks) * p.heads_q * p.batch;
    const int64_t units = p.causal ? (tiles + 1) / 2 : tiles;  // causal CTAs walk pairs of tiles (tile_at)
    grid = dim3(static_cast<unsigned>(std::min<int64_t>(units, int64_t{Tr::MINB} * sm_count())), 1, 1);
  }
  auto kernel = sm90::fwd_sm90_kernel<typename Tr::Elt, Tr>;
  set_smem(kernel, Tr::kSmem);
  kernel<<<grid, Tr::NTHREADS, Tr::kSmem, st>>>(a, maps);
  check_cuda(cudaGetLastError(), "sm90 forward launch");
}

}  // namespace tessera::attention::cuda
