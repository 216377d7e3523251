// Hopper (sm_90) data movement: mbarriers, the bulk tensor copy engine (TMA)
// and register reallocation between warpgroups. Tensor maps are made on the
// host (launch_sm90.cuh) and passed as __grid_constant__ kernel parameters.
#pragma once

#include <cuda.h>  // CUtensorMap (a type only: nothing links libcuda)

#include <cstdint>

namespace tessera::attention::cuda::sm90 {

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes initialised barriers visible to the copy engine and other threads (before a CTA barrier).
__device__ __forceinline__ void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }

// Arrives once and announces `bytes` of copies that will complete on the barrier.
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Arrives `count` times at once (one thread standing for a warpgroup's four warps).
__device__ __forceinline__ void mbar_arrive_cnt(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Whether the barrier's phase with this parity has completed (one try; the hardware may hold the
// thread a little before answering no).
__device__ __forceinline__ bool mbar_try(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}
// Spins until the barrier's phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  while (!mbar_try(bar, parity)) {
  }
}
// The same for a thread that waits long and has nothing else to do (the forward's producer, which
// waits a whole key block for each stage to be freed): it sleeps between tries, so its spinning
// does not take issue slots from the consumer warps on its scheduler.
__device__ __forceinline__ void mbar_wait_sleepy(uint32_t bar, uint32_t parity) {
  while (!mbar_try(bar, parity)) __nanosleep(64);
}

// One box of a 4-D tensor map (coordinates innermost first) into shared
// memory at dst; completes `box bytes` of transactions on bar.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                            int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// `bytes` (a multiple of 16; both addresses 16-byte aligned) from global into shared
// memory by the copy engine, completing as transactions on bar.
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// TMA reduce-add of a shared-memory box into a 3-D fp32 tensor at (c0, c1, c2), tracked by
// the issuing thread's bulk group (bulk_commit / bulk_wait_read / bulk_wait).
__device__ __forceinline__ void tma_reduce_add_3d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// TMA store of a shared-memory box into a 4-D tensor at (c0, c1, c2, c3); rows and columns
// past the tensor are not written. Tracked by the issuing thread's bulk group, like the above.
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}

// Bulk groups (the reduce-adds and stores above): commit the issued ones as a group, and wait for them.
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Until at most N of this thread's bulk groups are still reading their source.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// Until at most N of this thread's bulk groups are incomplete (writes done).
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

// Named barriers among a subset of warps (id 0 is __syncthreads'): the
// consumer warpgroups take turns issuing their GEMMs.
__device__ __forceinline__ void named_sync(int id, int nthreads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int nthreads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}

// Register reallocation (sm_90a): the producer warpgroup gives registers back,
// the consumer warpgroups take them.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }

// Q, K, V of one call as 4-D tensor maps (head dim, rows, heads, batches),
// 128-byte swizzle, boxes of 64 columns x (query or key block) rows; O with
// boxes of 64 rows (one consumer's), used when o_store is set (fixed-length
// calls: a varlen box would run into the next sequence's rows).
struct FwdMaps {
  CUtensorMap q, k, v, o;
  int o_store;
  int half_last;     // a tile's last 128-key block may be computed as 64 keys (fwd_sm90_kernel.cuh)
  int lazy_rescale;  // d128: O rescaled only where a row's max grows by more than 8 in log2 units (fwd_sm90_kernel.cuh)
};

}  // namespace tessera::attention::cuda::sm90
