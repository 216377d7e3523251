// Definitions of the launch templates of launch.h; included by inst_*.cu only.
#pragma once

#include "launch.cuh"
#include "tile_traits.cuh"

namespace tessera::attention::cuda {

template <typename K>
inline void set_smem(K kernel, int bytes) {
  if (bytes > 48 * 1024)
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), "smem attribute");
}

inline bool has_mods(const KArgs& a) {
  return a.p.num_bias > 0 || a.p.alibi_slopes != nullptr || a.dropout;
}

template <typename T, int D>
void launch_fwd(const KArgs& a, cudaStream_t st) {
  using Tr = typename FwdCfg<T, D>::type;
  const AttentionParams& p = a.p;
  dim3 grid((p.seqlen_q + Tr::BM - 1) / Tr::BM, p.heads_q, p.batch);
  auto kernel = has_mods(a) ? fwd_kernel<T, Tr, true> : fwd_kernel<T, Tr, false>;
  set_smem(kernel, Tr::kSmem);
  kernel<<<grid, Tr::NW * 32, Tr::kSmem, st>>>(a);
  check_cuda(cudaGetLastError(), "forward launch");
}

template <typename T, int D>
void launch_bwd(const KArgs& a, cudaStream_t st) {
  using Tr = typename BwdCfg<T, D>::type;
  const AttentionParams& p = a.p;
  dim3 grid((p.seqlen_k + Tr::BN - 1) / Tr::BN, p.heads_kv, p.batch);
  auto kernel = has_mods(a) ? bwd_kernel<T, Tr, true> : bwd_kernel<T, Tr, false>;
  set_smem(kernel, Tr::kSmem);
  kernel<<<grid, Tr::NW * 32, Tr::kSmem, st>>>(a);
  check_cuda(cudaGetLastError(), "backward launch");
}

template <typename T, int D>
void launch_dq(const KArgs& a, cudaStream_t st) {
  using Tr = typename QsideCfg<T, D>::type;
  const AttentionParams& p = a.p;
  dim3 grid((p.seqlen_q + Tr::BM - 1) / Tr::BM, p.heads_q, p.batch);
  auto kernel = dq_kernel<T, Tr>;
  set_smem(kernel, Tr::kSmem);
  kernel<<<grid, Tr::NW * 32, Tr::kSmem, st>>>(a);
  check_cuda(cudaGetLastError(), "deterministic dq launch");
}

template <typename T, int D>
void launch_dbias(const KArgs& a, int t, cudaStream_t st) {
  using Tr = typename QsideCfg<T, D>::type;
  const AttentionParams& p = a.p;
  const BiasTerm& bt = p.bias[t];
  const int EB = bt.batch_stride == 0 ? 1 : bt.batch_mod;
  const int EH = bt.head_stride == 0 ? 1 : bt.head_mod;
  const int gx = bt.row_stride == 0 ? 1 : (p.seqlen_q + Tr::BM - 1) / Tr::BM;
  dim3 grid(gx, EB * EH);
  auto kernel = dbias_kernel<T, Tr>;
  set_smem(kernel, Tr::kSmem);
  kernel<<<grid, Tr::NW * 32, Tr::kSmem, st>>>(a, t);
  check_cuda(cudaGetLastError(), "deterministic dbias launch");
}

#define TESSERA_INSTANTIATE(T, D)                                         \
  template void launch_fwd<T, D>(const KArgs&, cudaStream_t);             \
  template void launch_bwd<T, D>(const KArgs&, cudaStream_t);             \
  template void launch_dq<T, D>(const KArgs&, cudaStream_t);              \
  template void launch_dbias<T, D>(const KArgs&, int, cudaStream_t);

}  // namespace tessera::attention::cuda
