// Tensor maps for the Hopper kernels' TMA copies: a [batches, rows, heads, cols]
// tensor of 16-bit elements as a 4-D map with boxes of 64 columns x box_rows
// rows, 128-byte swizzled. Host code only (launch_sm90_*.cu).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "launch.cuh"

namespace tessera::attention::cuda {

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
// rows or columns fill zeros, stores there write nothing.
inline CUtensorMap make_map(const void* base, DType dt, int cols, int64_t rows, int heads, int batches, int64_t row_stride,
                     int64_t head_stride, int64_t batch_stride, int box_rows) {
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

// The maps of one call's tensors, boxes of box_rows rows: Q and dO are
// [rows_q, heads_q, cols], K and V [rows_k, heads_kv, cols]; varlen rows are
// global rows of a batch of one.
struct MapRows {
  int64_t q, k;
  int batches;
};
inline MapRows map_rows(const AttentionParams& p) {
  const bool varlen = p.cu_seqlens_q != nullptr;
  return {varlen ? p.total_q : p.seqlen_q, varlen ? p.total_k : p.seqlen_k, varlen ? 1 : p.batch};
}
// A query-side tensor (Q, dO, O: [rows_q, heads_q, cols]) and a key-side one (K, V, dK, dV:
// [rows_k, heads_kv, cols]) with the given element strides.
inline CUtensorMap map_q_side(const AttentionParams& p, const void* base, int cols, int64_t rs, int64_t hs, int64_t bs,
                              int box_rows) {
  const MapRows r = map_rows(p);
  return make_map(base, p.dtype, cols, r.q, p.heads_q, r.batches, rs, hs, bs, box_rows);
}
inline CUtensorMap map_k_side(const AttentionParams& p, const void* base, int cols, int64_t rs, int64_t hs, int64_t bs,
                              int box_rows) {
  const MapRows r = map_rows(p);
  return make_map(base, p.dtype, cols, r.k, p.heads_kv, r.batches, rs, hs, bs, box_rows);
}
inline CUtensorMap map_q(const AttentionParams& p, int box_rows) {
  return map_q_side(p, p.q, p.head_dim, p.q_row_stride, p.q_head_stride, p.q_batch_stride, box_rows);
}
inline CUtensorMap map_dout(const AttentionParams& p, int box_rows) {
  return map_q_side(p, p.dout, p.head_dim_v, p.do_row_stride, p.do_head_stride, p.do_batch_stride, box_rows);
}
inline CUtensorMap map_o(const AttentionParams& p, int box_rows) {
  return map_q_side(p, p.o, p.head_dim_v, p.o_row_stride, p.o_head_stride, p.o_batch_stride, box_rows);
}
inline CUtensorMap map_k(const AttentionParams& p, int box_rows) {
  return map_k_side(p, p.k, p.head_dim, p.k_row_stride, p.k_head_stride, p.k_batch_stride, box_rows);
}
inline CUtensorMap map_v(const AttentionParams& p, int box_rows) {
  return map_k_side(p, p.v, p.head_dim_v, p.v_row_stride, p.v_head_stride, p.v_batch_stride, box_rows);
}
// The backward's dK and dV, for its TMA stores.
inline CUtensorMap map_dk(const AttentionParams& p, int box_rows) {
  return map_k_side(p, p.dk, p.head_dim, p.dk_row_stride, p.dk_head_stride, p.dk_batch_stride, box_rows);
}
inline CUtensorMap map_dv(const AttentionParams& p, int box_rows) {
  return map_k_side(p, p.dv, p.head_dim_v, p.dv_row_stride, p.dv_head_stride, p.dv_batch_stride, box_rows);
}

// The backward's fp32 dQ accumulator [rows_q, heads_q, dqd] as a 3-D map for TMA reduce-adds:
// boxes of 32 columns (128 bytes, swizzled) x 1 head x 64 rows; rows and columns past the
// tensor are not written.
inline CUtensorMap map_dq_accum(const float* base, int dqd, int heads, int64_t rows) {
  CUtensorMap m;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(dqd), static_cast<cuuint64_t>(heads),
                              static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(dqd) * 4, static_cast<cuuint64_t>(heads) * dqd * 4};
  const cuuint32_t box[3] = {32, 1, 64};
  const cuuint32_t estr[3] = {1, 1, 1};
  const CUresult r = encode_fn()(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, const_cast<float*>(base), dims, strides, box,
                                 estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("tessera attention CUDA: cuTensorMapEncodeTiled (dQ) failed (" + std::to_string(int(r)) +
                             ")");
  return m;
}

}  // namespace tessera::attention::cuda
