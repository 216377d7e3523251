// Launches of the exact float32 kernels, one instantiation per head-dim
// bucket (columns per lane NC = 2, 4, 8: head dims <= 64, 128, 256).
#include "kernels/f32/f32_bwd_kernel.cuh"
#include "kernels/f32/f32_fwd_kernel.cuh"
#include "kernels/f32/f32_qside_kernel.cuh"
#include "launch_impl.cuh"  // set_smem, reduce_dbias_partials

namespace tessera::attention::cuda {
namespace {

static_assert(kF32Rows == F32::TILE, "launch.cuh's kF32Rows");

template <typename K>
void launch(K kernel, dim3 grid, size_t smem, cudaStream_t st, const char* what, const KArgs& a) {
  set_smem(kernel, static_cast<int>(smem));
  kernel<<<grid, F32::NT, smem, st>>>(a);
  check_cuda(cudaGetLastError(), what);
}

int tiles(int n) { return (n + F32::TILE - 1) / F32::TILE; }

template <int NC>
void launch_nc(const KArgs& a, cudaStream_t st, F32Pass pass) {
  const AttentionParams& p = a.p;
  switch (pass) {
    case F32Pass::fwd:
      launch(f32_fwd_kernel<NC>, dim3(tiles(p.seqlen_q), p.heads_q, p.batch), f32_fwd_smem(p), st, "f32 forward launch", a);
      break;
    case F32Pass::bwd:
      launch(f32_bwd_kernel<NC>, dim3(tiles(p.seqlen_k), p.heads_kv, p.batch), f32_bwd_smem(p), st, "f32 backward launch", a);
      break;
    case F32Pass::dq:
      launch(f32_dq_kernel<NC>, dim3(tiles(p.seqlen_q), p.heads_q, p.batch), f32_qside_smem(p), st, "f32 dq launch", a);
      break;
  }
}

}  // namespace

void launch_f32(const KArgs& a, cudaStream_t st, F32Pass pass) {
  const int d = std::max(a.p.head_dim, a.p.head_dim_v);
  if (d <= 64) launch_nc<2>(a, st, pass);
  else if (d <= 128) launch_nc<4>(a, st, pass);
  else launch_nc<8>(a, st, pass);
}

void launch_f32_dbias(const KArgs& a, int t, float* partial, cudaStream_t st) {
  const DbiasPlan pl = dbias_plan(a.p, t);
  DbiasSplit sp{pl.splits, pl.EB, pl.EH, pl.rows, partial};
  const size_t smem = f32_qside_smem(a.p);
  set_smem(f32_dbias_kernel, static_cast<int>(smem));
  f32_dbias_kernel<<<dim3(pl.grid_x, pl.EB * pl.EH, pl.splits), F32::NT, smem, st>>>(a, t, sp);
  check_cuda(cudaGetLastError(), "f32 dbias launch");
  reduce_dbias_partials<float>(a, t, pl, sp, st);
}

}  // namespace tessera::attention::cuda
