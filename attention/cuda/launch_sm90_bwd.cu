// Launches of the Hopper backward for fp16 / bf16 at the 64 and 128 head-dim buckets, with the
// TMA tensor maps of Q, K, V and dO, in the kernel dispatch.cu chose: one warpgroup per 64 keys
// (kernels/sm90/bwd_sm90_wg_kernel.cuh), the pair of warpgroups per 128 keys (bwd_sm90_kernel.cuh)
// or the warp-specialised kernel (bwd_sm90_ws_kernel.cuh). Like launch_sm90_fwd.cu: compiled for every
// architecture, launched only on compute 9.0 from a build with the sm_90a image.
#include <stdexcept>

#include "kernels/sm90/bwd_sm90_kernel.cuh"
#include "kernels/sm90/bwd_sm90_wg_kernel.cuh"
#include "kernels/sm90/bwd_sm90_ws_kernel.cuh"
#include "launch_impl.cuh"
#include "launch_sm90.cuh"  // sm_count
#include "primitives/tensor_map.cuh"

namespace tessera::attention::cuda {
namespace {

// Causal calls on the warp-specialised kernel number their tiles heaviest first within chunks of 8 (kv head,
// sequence) pairs (chunked_order), so the last heads' heavy tiles do not run on alone at the launch's end;
// only rows whose Q and dO take at most 4 MB per head (keys x head dim <= 8192 x 128): more heads at work
// together than that overflow the L2.
int ws_causal_chunk(const KArgs& a) {
  if (a.causal_chunk >= 0) return a.causal_chunk;
  const AttentionParams& p = a.p;
  return p.causal && int64_t{p.seqlen_k} * p.head_dim <= int64_t{8192} * 128 ? 8 : 0;
}

template <typename Tr, Kernel KIND>
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
  // the pair and warp-specialised kernels number tiles key block fastest, then (head split,) kv head, then
  // sequence; only the warp-specialised kernel takes head splits (dispatch.cu)
  const int splits = KIND == Kernel::sm90_backward_ws ? a.head_splits : 1;
  if (splits < 1 || (splits > 1 && !a.dkv_accum))
    throw std::logic_error("sm90 backward: head splits without their dK / dV accumulators");
  const int64_t tiles = static_cast<int64_t>(nkb) * p.heads_kv * p.batch * splits;
  if (KIND != Kernel::sm90_backward_one_wg && tiles > INT32_MAX)
    throw std::invalid_argument("sm90 backward: more than 2^31 key blocks");
  if constexpr (KIND == Kernel::sm90_backward_one_wg) {
    auto kernel = sm90::bwd_sm90_wg_kernel<typename Tr::Elt, Tr>;
    set_smem(kernel, Tr::kSmem);
    kernel<<<dim3(nkb, p.heads_kv, p.batch), Tr::NTHREADS, Tr::kSmem, st>>>(a, maps);
  } else if constexpr (KIND == Kernel::sm90_backward_ws) {
    using Ws = sm90::BwdSm90WsTraits<typename Tr::Elt, Tr::D, Tr::BM>;
    auto kernel = sm90::bwd_sm90_ws_kernel<typename Tr::Elt, Ws>;
    set_smem(kernel, Ws::kSmem);
    KArgs wa = a;
    wa.causal_chunk = ws_causal_chunk(a);
    kernel<<<static_cast<unsigned>(tiles), Ws::NTHREADS, Ws::kSmem, st>>>(wa, maps, a.bwd_rotate ? 1 : 0);
  } else {  // the pair: one CTA per tile
    const int64_t ctas = tiles;
    auto kernel = sm90::bwd_sm90_kernel<typename Tr::Elt, Tr>;
    set_smem(kernel, Tr::kSmem);
    kernel<<<static_cast<unsigned>(ctas), Tr::NTHREADS, Tr::kSmem, st>>>(a, maps, static_cast<int>(tiles),
                                                                          a.bwd_rotate ? 1 : 0);
  }
  check_cuda(cudaGetLastError(), "sm90 backward launch");
}

}  // namespace

template <typename T, int D>
void launch_bwd_sm90(const KArgs& a, const Choice& c, cudaStream_t st) {
  using Pair = sm90::BwdSm90Traits<T, D, Bwd90Tile<D>::query_block>;
  switch (c.kernel) {
    case Kernel::sm90_backward_one_wg:
      return launch_cfg<sm90::BwdSm90WgTraits<T, D>, Kernel::sm90_backward_one_wg>(a, st);
    case Kernel::sm90_backward_ws: return launch_cfg<Pair, Kernel::sm90_backward_ws>(a, st);
    case Kernel::sm90_backward_pair: return launch_cfg<Pair, Kernel::sm90_backward_pair>(a, st);
    default: throw std::logic_error("tessera attention CUDA: a Hopper backward asked for another kernel");
  }
}

template void launch_bwd_sm90<__nv_bfloat16, 64>(const KArgs&, const Choice&, cudaStream_t);
template void launch_bwd_sm90<__nv_bfloat16, 128>(const KArgs&, const Choice&, cudaStream_t);
template void launch_bwd_sm90<__half, 64>(const KArgs&, const Choice&, cudaStream_t);
template void launch_bwd_sm90<__half, 128>(const KArgs&, const Choice&, cudaStream_t);

}  // namespace tessera::attention::cuda
