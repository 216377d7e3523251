// Definitions of the launch templates of launch.cuh; included by the instantiations and launch_*.cu only.
#pragma once

#include <algorithm>

#include "launch.cuh"
#include "tile_configs.cuh"

namespace tessera::attention::cuda {

template <typename K>
inline void set_smem(K kernel, int bytes) {
  if (bytes > 48 * 1024)
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), "smem attribute");
}

// One variant (MODS) of the forward main kernel of traits Tr on stream st.
template <typename T, typename Tr, int MODS>
void launch_fwd_kernel(const KArgs& a, cudaStream_t st) {
  const AttentionParams& p = a.p;
  const int qblocks = (p.seqlen_q + Tr::BM - 1) / Tr::BM;
  int ctas = qblocks;  // per sequence and head (FwdTraits QSPLIT, KArgs::qsplit)
  // (short sequences only, at most kQsplitMaxBlocks query blocks: a longer one split k ways would run on k
  // CTAs per head)
  constexpr int kQsplitMaxBlocks = 8;
  if constexpr (Tr::QSPLIT > 0)
    if (a.qsplit >= 0 && qblocks <= kQsplitMaxBlocks) ctas = std::min(a.qsplit > 0 ? a.qsplit : Tr::QSPLIT, qblocks);
  dim3 grid(ctas, p.heads_q, p.batch);
  const int smem = MODS == kModsBias ? Tr::kSmemBias : Tr::kSmem;
  set_smem(fwd_kernel<T, Tr, MODS>, smem);
  fwd_kernel<T, Tr, MODS><<<grid, Tr::NW * 32, smem, st>>>(a);
  check_cuda(cudaGetLastError(), "forward launch");
}

// Shared memory of bwd_kernel's WIN variant (kModsBias) for nq query rows: the tiles, one bias stage,
// then dQ (fp32) and lse / D of the query blocks' rows.
template <typename Tr>
constexpr int win_smem(int nq) {
  const int rows = (nq + Tr::BM - 1) / Tr::BM * Tr::BM;
  return Tr::kSmem + Tr::kBiasStageBytes + rows * (Tr::D + 2) * static_cast<int>(sizeof(float));
}

// bwd_kernel's WIN variant (kModsBias, d16 / d32): one CTA per sequence and head.
template <typename T, typename Tr>
void launch_bwd_win(const KArgs& a, cudaStream_t st) {
  const AttentionParams& p = a.p;
  auto kernel = bwd_kernel<T, Tr, kModsBias, true, true>;
  const int smem = win_smem<Tr>(p.seqlen_q);
  set_smem(kernel, smem);
  kernel<<<dim3(1, p.heads_kv, p.batch), Tr::NW * 32, smem, st>>>(a);
  check_cuda(cudaGetLastError(), "backward launch");
}

// One variant of the backward main kernel (kModsBias only where Tr::kBiasStaged: the callers check),
// LEAN or not.
template <typename T, typename Tr, int MODS, bool LEAN = false>
void launch_bwd_kernel(const KArgs& a, cudaStream_t st) {
  const AttentionParams& p = a.p;
  dim3 grid((p.seqlen_k + Tr::BN - 1) / Tr::BN, p.heads_kv, p.batch);
  auto kernel = bwd_kernel<T, Tr, MODS, LEAN>;
  const int smem = MODS == kModsBias ? Tr::kSmemBias : Tr::kSmem;
  set_smem(kernel, smem);
  kernel<<<grid, Tr::NW * 32, smem, st>>>(a);
  check_cuda(cudaGetLastError(), "backward launch");
}

// The tuning tool's entry points: traits Tr in modifier variant `mods` (mods_kind, or one it
// forces). Return the variant launched: the backward takes kModsAll where Tr cannot stage bias
// tiles (Tr::kBiasStaged), and LEAN where bwd_lean_ok and allow_lean allow (*lean set when it did).
template <typename T, typename Tr>
int launch_fwd_tr(const KArgs& a, cudaStream_t st, int mods) {
  if (mods == kModsNone) launch_fwd_kernel<T, Tr, kModsNone>(a, st);
  else if (mods == kModsBias) launch_fwd_kernel<T, Tr, kModsBias>(a, st);
  else launch_fwd_kernel<T, Tr, kModsAll>(a, st);
  return mods;
}

template <typename T, typename Tr, int MODS>
void launch_bwd_lean_or_not(const KArgs& a, cudaStream_t st, bool lean) {
  if constexpr (Tr::D <= 32 && MODS != kModsAll) {
    if (lean) return launch_bwd_kernel<T, Tr, MODS, true>(a, st);
  }
  launch_bwd_kernel<T, Tr, MODS>(a, st);
}

template <typename T, typename Tr>
int launch_bwd_tr(const KArgs& a, cudaStream_t st, int mods, bool allow_lean = true, bool* lean = nullptr) {
  if (a.win) {  // (the tool set a.win itself: WIN, which is staged-bias only)
    if constexpr (Tr::D <= 32 && Tr::kBiasStaged) {
      if (lean) *lean = true;
      launch_bwd_win<T, Tr>(a, st);
      return kModsBias;
    } else {
      throw std::logic_error("tessera attention CUDA: the WIN backward asked of traits without it");
    }
  }
  if (!Tr::kBiasStaged && mods == kModsBias) mods = kModsAll;
  const bool le = allow_lean && Tr::D <= 32 && mods != kModsAll && bwd_lean_ok(a, Tr::D);
  if (lean) *lean = le;
  if constexpr (Tr::kBiasStaged) {
    if (mods == kModsBias) {
      launch_bwd_lean_or_not<T, Tr, kModsBias>(a, st, le);
      return mods;
    }
  }
  if (mods == kModsNone) launch_bwd_lean_or_not<T, Tr, kModsNone>(a, st, le);
  else launch_bwd_kernel<T, Tr, kModsAll>(a, st);
  return mods;
}

// The portable forward in the variant c.mods (the staged-bias variant with its own tiles).
template <typename T, int D>
void launch_fwd(const KArgs& a, const Choice& c, cudaStream_t st) {
  using Tr = FwdOf<T, D, FwdTile<D>>;
  if (c.mods == Mods::none) launch_fwd_kernel<T, Tr, kModsNone>(a, st);
  else if (c.mods == Mods::bias) launch_fwd_kernel<T, FwdOf<T, D, FwdBiasTile<D>>, kModsBias>(a, st);
  else launch_fwd_kernel<T, Tr, kModsAll>(a, st);
}

// The portable backward: c.kernel portable / portable_lean / portable_win in the variant c.mods.
template <typename T, int D>
void launch_bwd(const KArgs& a, const Choice& c, cudaStream_t st) {
  using Tr = BwdOf<T, D, BwdTile<D>>;
  using TrB = BwdOf<T, D, BwdBiasTile<D>>;
  const bool lean = c.kernel == Kernel::portable_lean;
  if constexpr (D <= 32) {
    using TrW = BwdOf<T, D, BwdWinTile<D>>;
    static_assert(win_smem<TrW>(win_max_rows(D)) + 1024 <= 228 * 1024 / 2, "WIN: two CTAs per SM");
    if (c.kernel == Kernel::portable_win) return launch_bwd_win<T, TrW>(a, st);
  }
  if (c.kernel == Kernel::portable_win) throw std::logic_error("tessera attention CUDA: WIN asked above d32");
  if constexpr (TrB::kBiasStaged) {
    if (c.mods == Mods::bias) return launch_bwd_lean_or_not<T, TrB, kModsBias>(a, st, lean);
  }
  if (c.mods == Mods::none) launch_bwd_lean_or_not<T, Tr, kModsNone>(a, st, lean);
  else launch_bwd_kernel<T, Tr, kModsAll>(a, st);  // (Mods::bias where the tiles cannot be staged: dispatch.cu)
}

template <typename T, int D>
void launch_dq(const KArgs& a, cudaStream_t st) {
  using Tr = QsideOf<T, D, QsideTile<D>>;
  const AttentionParams& p = a.p;
  dim3 grid((p.seqlen_q + Tr::BM - 1) / Tr::BM, p.heads_q, p.batch);
  auto kernel = dq_kernel<T, Tr>;
  set_smem(kernel, Tr::kSmem);
  kernel<<<grid, Tr::NW * 32, Tr::kSmem, st>>>(a);
  check_cuda(cudaGetLastError(), "deterministic dq launch");
}

// Sums the split partials of a deterministic dBias into the grad (splits > 1).
template <typename T>
void reduce_dbias_partials(const KArgs& a, int t, const DbiasPlan& pl, const DbiasSplit& sp, cudaStream_t st) {
  if (pl.splits <= 1) return;
  const int64_t n = static_cast<int64_t>(pl.EB) * pl.EH * pl.rows * a.p.seqlen_k;
  const int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 4096));
  dbias_reduce<T><<<blocks, 256, 0, st>>>(a, t, sp);
  check_cuda(cudaGetLastError(), "deterministic dbias reduce launch");
}

template <typename T, int D>
void launch_dbias(const KArgs& a, int t, float* partial, cudaStream_t st) {
  using Tr = QsideOf<T, D, QsideTile<D>>;
  const DbiasPlan pl = dbias_plan(a.p, t);
  DbiasSplit sp{pl.splits, pl.EB, pl.EH, pl.rows, partial};
  dim3 grid(pl.grid_x, pl.EB * pl.EH, pl.splits);
  auto kernel = dbias_kernel<T, Tr>;
  set_smem(kernel, Tr::kSmem);
  kernel<<<grid, Tr::NW * 32, Tr::kSmem, st>>>(a, t, sp);
  check_cuda(cudaGetLastError(), "deterministic dbias launch");
  reduce_dbias_partials<T>(a, t, pl, sp, st);
}

#define TESSERA_INSTANTIATE(T, D)                                                   \
  template void launch_fwd<T, D>(const KArgs&, const Choice&, cudaStream_t);        \
  template void launch_bwd<T, D>(const KArgs&, const Choice&, cudaStream_t);        \
  template void launch_dq<T, D>(const KArgs&, cudaStream_t);                        \
  template void launch_dbias<T, D>(const KArgs&, int, float*, cudaStream_t);

}  // namespace tessera::attention::cuda
