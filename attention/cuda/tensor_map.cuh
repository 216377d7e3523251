// Tensor maps for the Hopper kernels' TMA loads: a [batches, rows, heads, cols]
// tensor of 16-bit elements as a 4-D map with boxes of 64 columns x box_rows
// rows, 128-byte swizzled. Host code only (inst_sm90*.cu).
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
// rows or columns fill zeros.
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

}  // namespace tessera::attention::cuda
