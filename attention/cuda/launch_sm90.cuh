// Launch of the Hopper forward (fwd_sm90_kernel.cuh) with any FwdSm90Traits,
// with the TMA tensor maps of Q, K and V: inst_sm90.cu instantiates the
// shipping configurations, bench/attention_cuda_tune.cu times alternatives.
// The kernel body exists only in an sm_90a image (TESSERA_SM90A): launch it
// on compute 9.0 devices only.
#pragma once

#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include "fwd_sm90_kernel.cuh"
#include "launch_impl.cuh"

namespace tessera::attention::cuda {

namespace sm90 {

// cuTensorMapEncodeTiled from the driver the runtime already loaded (no link to libcuda).
inline PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    check_cuda(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q),
               "driver entry point cuTensorMapEncodeTiled");
    if (q != cudaDriverEntryPointSuccess || f == nullptr)
      throw std::runtime_error("tessera attention CUDA: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// A [batches, rows, heads, cols] tensor (element strides) as a 4-D map with
// boxes of 64 columns x box_rows rows, 128-byte swizzled; reads past the
// rows or columns fill zeros.
inline CUtensorMap make_map(const void* base, DType dt, int cols, int64_t rows, int heads, int batches,
                            int64_t row_stride, int64_t head_stride, int64_t batch_stride, int box_rows) {
  CUtensorMap m;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(batches)};
  // strides of dims 1..3 in bytes; unused dims (size 1) get a harmless non-zero multiple of 16
  auto bytes = [](int64_t s, int64_t fallback) {
    return static_cast<cuuint64_t>((s > 0 ? s : fallback) * 2);
  };
  const cuuint64_t strides[3] = {bytes(row_stride, 8), bytes(head_stride, row_stride * rows),
                                 bytes(batch_stride, row_stride * rows)};
  const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(box_rows), 1, 1};
  const cuuint32_t estr[4] = {1, 1, 1, 1};
  const CUresult r = encode_fn()(&m, dt == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                                 4, const_cast<void*>(base), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                 CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("tessera attention CUDA: cuTensorMapEncodeTiled failed (" + std::to_string(int(r)) + ")");
  return m;
}

}  // namespace sm90

// The forward with traits Tr = sm90::FwdSm90Traits<T, D, BN, STAGES, NCONS, PINGPONG>:
// Q boxes of Tr::BM rows (one per CTA), K / V boxes of Tr::BN rows (one key block).
template <typename Tr>
void launch_fwd_sm90_cfg(const KArgs& a, cudaStream_t st) {
  using sm90::make_map;
  const AttentionParams& p = a.p;
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t rq = varlen ? p.total_q : p.seqlen_q, rk = varlen ? p.total_k : p.seqlen_k;
  const int nb = varlen ? 1 : p.batch;
  sm90::FwdMaps maps;
  maps.q = make_map(p.q, p.dtype, p.head_dim, rq, p.heads_q, nb, p.q_row_stride, p.q_head_stride, p.q_batch_stride, Tr::BM);
  maps.k = make_map(p.k, p.dtype, p.head_dim, rk, p.heads_kv, nb, p.k_row_stride, p.k_head_stride, p.k_batch_stride, Tr::BN);
  maps.v = make_map(p.v, p.dtype, p.head_dim_v, rk, p.heads_kv, nb, p.v_row_stride, p.v_head_stride, p.v_batch_stride,
                    Tr::BN);
  dim3 grid((p.seqlen_q + Tr::BM - 1) / Tr::BM, p.heads_q, p.batch);
  auto kernel = sm90::fwd_sm90_kernel<typename Tr::Elt, Tr>;
  set_smem(kernel, Tr::kSmem);
  kernel<<<grid, Tr::NTHREADS, Tr::kSmem, st>>>(a, maps);
  check_cuda(cudaGetLastError(), "sm90 forward launch");
}

}  // namespace tessera::attention::cuda
