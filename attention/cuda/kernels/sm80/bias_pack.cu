// Repacking of bias terms into fragment order (PackedBias, bias_pack.cuh) before the
// fp16 / bf16 kernels run, and the unpacking of the backward's fp32 dBias tiles into the
// caller's gradient. One warp per 16 x 16 tile; each lane writes its 8 elements with one
// 16-byte store (fp32: two), so the kernels later read them the same way.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/sm80/bias_pack.cuh"
#include "launch.cuh"
#include "tessera/attention/params.h"

namespace tessera::attention::cuda {
namespace {

constexpr int kTilesPerBlock = 4;  // 128 threads, one warp per tile

struct PackGeom {
  int nq, nk;      // valid rows / columns of the [query][key] slice
  int rt, ct, eh;  // packed tiles (rows and columns of the packed orientation), head slices
  int64_t tiles;
};

// Tile -> (slice base in the term, R, C) and the lane's element (i, j) of [query][key].
struct TileAt {
  int64_t base;
  int R, C;
};
__device__ __forceinline__ TileAt tile_at(const BiasTerm& t, const PackGeom& g, int64_t tile) {
  TileAt a;
  a.C = static_cast<int>(tile % g.ct);
  const int64_t rs = tile / g.ct;
  a.R = static_cast<int>(rs % g.rt);
  const int64_t s = rs / g.rt;
  a.base = (s / g.eh) * t.batch_stride + (s % g.eh) * t.head_stride;
  return a;
}

template <bool TRANS>
__global__ void __launch_bounds__(32 * kTilesPerBlock) pack_bias_kernel(const BiasTerm t, const PackGeom g,
                                                                        void* dst, int* live) {
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * kTilesPerBlock + threadIdx.x / 32;
  if (tile >= g.tiles) return;
  const int lane = threadIdx.x & 31;
  const TileAt at = tile_at(t, g, tile);
  int64_t src[8];
  bool ok[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    int r, c;
    frag_rc(lane, k, r, c);
    r += 16 * at.R;
    c += 16 * at.C;
    const int i = TRANS ? c : r, j = TRANS ? r : c;
    ok[k] = i < g.nq && j < g.nk;
    src[k] = at.base + static_cast<int64_t>(i) * t.row_stride + j;
  }
  const int64_t off = tile * 256 + lane * 8;
  uint32_t nz = 0;
  bool nonfinite = false;  // an exponent of all ones: inf or NaN
  if (t.dtype == DType::f32) {
    const float* s = static_cast<const float*>(t.ptr);
    float v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      v[k] = ok[k] ? s[src[k]] : 0.f;
      nz |= __float_as_uint(v[k]) << 1;  // any bit but the sign
      nonfinite |= (__float_as_uint(v[k]) & 0x7F800000u) == 0x7F800000u;
    }
    float4* d = reinterpret_cast<float4*>(static_cast<float*>(dst) + off);
    d[0] = make_float4(v[0], v[1], v[2], v[3]);
    d[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    const unsigned short* s = static_cast<const unsigned short*>(t.ptr);
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 8; k += 2) {
      const uint32_t lo = ok[k] ? s[src[k]] : 0u, hi = ok[k + 1] ? s[src[k + 1]] : 0u;
      w[k / 2] = lo | (hi << 16);
      nz |= w[k / 2] & 0x7FFF7FFFu;  // any bit but the signs
      const uint32_t e = t.dtype == DType::bf16 ? 0x7F80u : 0x7C00u;
      nonfinite |= (lo & e) == e || (hi & e) == e;
    }
    *reinterpret_cast<uint4*>(static_cast<unsigned short*>(dst) + off) = make_uint4(w[0], w[1], w[2], w[3]);
  }
  // the slice's flags (zeroed before): nonzero values, non-finite ones (which are nonzero too)
  const int flags = (__any_sync(0xFFFFFFFFu, nz != 0) ? kSliceLive : 0) |
                    (__any_sync(0xFFFFFFFFu, nonfinite) ? kSliceNonFinite : 0);
  if (flags && lane == 0) atomicOr(live + tile / (static_cast<int64_t>(g.rt) * g.ct), flags);
}

// grad[(i, j) of every slice] = packed backward tiles ([key][query] order).
__global__ void __launch_bounds__(32 * kTilesPerBlock) unpack_dbias_kernel(const BiasTerm t, const PackGeom g,
                                                                           const float* src) {
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * kTilesPerBlock + threadIdx.x / 32;
  if (tile >= g.tiles) return;
  const int lane = threadIdx.x & 31;
  const TileAt at = tile_at(t, g, tile);
  const float* s = src + dbias_frag_off(tile * 256, lane);  // (red_packed_tile's order)
  const float4 x = *reinterpret_cast<const float4*>(s), y = *reinterpret_cast<const float4*>(s + 128);
  const float v[8] = {x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w};
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    int r, c;
    frag_rc(lane, k, r, c);
    const int j = r + 16 * at.R, i = c + 16 * at.C;
    if (i < g.nq && j < g.nk) t.grad[at.base + static_cast<int64_t>(i) * t.row_stride + j] = v[k];
  }
}

PackGeom geom(const AttentionParams& p, int t, bool trans) {
  const BiasTerm& b = p.bias[t];
  PackGeom g;
  g.nq = p.seqlen_q;
  g.nk = p.seqlen_k;
  const int tq = (p.seqlen_q + 15) / 16, tk = (p.seqlen_k + 15) / 16;
  g.rt = trans ? tk : tq;
  g.ct = trans ? tq : tk;
  g.eh = bias_head_slices(b);
  const int eb = b.batch_stride ? b.batch_mod : 1;
  g.tiles = static_cast<int64_t>(eb) * g.eh * g.rt * g.ct;
  return g;
}

unsigned blocks_for(int64_t tiles) { return static_cast<unsigned>((tiles + kTilesPerBlock - 1) / kTilesPerBlock); }

// A packed term is its tiles (padded to 256 bytes), then one live flag per slice.
size_t packed_tile_bytes(const AttentionParams& p, int t) {
  const size_t b = static_cast<size_t>(geom(p, t, false).tiles) * 256 * (p.bias[t].dtype == DType::f32 ? 4 : 2);
  return (b + 255) / 256 * 256;
}
int64_t packed_slices(const PackGeom& g) { return g.tiles / std::max<int64_t>(1, int64_t(g.rt) * g.ct); }

}  // namespace

bool bias_packable(const AttentionParams& p, int t) {
  const BiasTerm& b = p.bias[t];
  // Row-broadcast terms (key padding) gather from one row per instruction already; packing
  // them would expand them Nq-fold. Terms past 1 GiB packed keep the gathers too.
  if (p.dtype == DType::f32 || b.row_stride == 0 || p.seqlen_q == 0 || p.seqlen_k == 0) return false;
  return packed_bias_bytes(p, t) <= (size_t(1) << 30);
}

size_t packed_bias_bytes(const AttentionParams& p, int t) {
  return packed_tile_bytes(p, t) + static_cast<size_t>(packed_slices(geom(p, t, false))) * sizeof(int);
}

size_t packed_grad_bytes(const AttentionParams& p, int t) {
  return static_cast<size_t>(geom(p, t, true).tiles) * 256 * sizeof(float);
}

PackedBias packed_geometry(const AttentionParams& p, int t, bool trans, const void* src) {
  const PackGeom g = geom(p, t, trans);
  PackedBias pk{};
  pk.ptr = src;
  pk.grad = nullptr;
  pk.live = reinterpret_cast<const int*>(static_cast<const char*>(src) + packed_tile_bytes(p, t));
  pk.rt = g.rt;
  pk.ct = g.ct;
  pk.bmod = FastDiv::make(static_cast<uint32_t>(p.bias[t].batch_mod));
  pk.hmod = FastDiv::make(static_cast<uint32_t>(p.bias[t].head_mod));
  return pk;
}

PackedBias pack_bias(const AttentionParams& p, int t, bool trans, void* dst, cudaStream_t st) {
  const PackGeom g = geom(p, t, trans);
  int* live = reinterpret_cast<int*>(static_cast<char*>(dst) + packed_tile_bytes(p, t));
  if (g.tiles > 0) {
    check_cuda(cudaMemsetAsync(live, 0, packed_slices(g) * sizeof(int), st), "memset packed bias flags");
    if (trans) pack_bias_kernel<true><<<blocks_for(g.tiles), 32 * kTilesPerBlock, 0, st>>>(p.bias[t], g, dst, live);
    else pack_bias_kernel<false><<<blocks_for(g.tiles), 32 * kTilesPerBlock, 0, st>>>(p.bias[t], g, dst, live);
    check_cuda(cudaGetLastError(), "bias pack launch");
  }
  return packed_geometry(p, t, trans, dst);
}

void unpack_dbias(const AttentionParams& p, int t, const float* packed, cudaStream_t st) {
  const PackGeom g = geom(p, t, true);
  if (g.tiles == 0) return;
  unpack_dbias_kernel<<<blocks_for(g.tiles), 32 * kTilesPerBlock, 0, st>>>(p.bias[t], g, packed);
  check_cuda(cudaGetLastError(), "dbias unpack launch");
}

}  // namespace tessera::attention::cuda
