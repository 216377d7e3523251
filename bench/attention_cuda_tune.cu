// Tile-shape exploration for the CUDA attention kernels: instantiates a few
// alternative traits per head dim and times them on one shape each (bf16).
// Not part of the library; built by tests/gpu when TESSERA_BENCH_CUDA=ON.
// The Hopper forward variants (fwd90) are built with TESSERA_SM90A (an
// sm_90a image) and run on compute 9.0 devices only.
// Arguments: none (everything), `swin` (the Swin window shapes: forward and backward traits, packed
// bias, LEAN and WIN backward), `swin-fwd` (the Swin forwards with and without the half-width last
// key block, ~20 s), `swin-ab` (the shipped Swin kernels beside their closest alternatives, alternating),
// `fwd90 [D]` (the Hopper forward's configurations).
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cuda/launch_impl.cuh"
#include "cuda_event_timer.cuh"
#include "swin_shift_mask.h"
#if defined(TESSERA_SM90A)
#include "cuda/launch_sm90.cuh"
#endif

using namespace tessera::attention;
using namespace tessera::attention::cuda;
using bf = __nv_bfloat16;

#define CK(x) check_cuda((x), #x)

__global__ void fill(bf* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    x ^= x >> 13; x *= 0x5bd1e995u; x ^= x >> 15;
    p[i] = __float2bfloat16(((x & 0xFFFFFF) / float(0x1000000) - 0.5f) * 3.4641f);
  }
}

struct Prob {
  KArgs a{};
  double flops = 0;
};

Prob make(int B, int N, int H, int D, bool causal, int swin_nw) {
  Prob P;
  AttentionParams& p = P.a.p;
  p.device = Device::cuda; p.dtype = DType::bf16;
  p.batch = B; p.seqlen_q = p.seqlen_k = N; p.heads_q = p.heads_kv = H; p.head_dim = p.head_dim_v = D;
  p.scale = 1.f / sqrtf(float(D)); p.causal = causal;
  const size_t n = size_t(B) * N * H * D;
  void* buf[8];
  for (int i = 0; i < 8; ++i) { CK(cudaMalloc(&buf[i], n * 2)); fill<<<1024, 256>>>((bf*)buf[i], n, i + 1); }
  p.q = buf[0]; p.k = buf[1]; p.v = buf[2]; p.o = buf[3]; p.dout = buf[4]; p.dq = buf[5]; p.dk = buf[6]; p.dv = buf[7];
  for (int64_t* s : {&p.q_head_stride, &p.k_head_stride, &p.v_head_stride, &p.o_head_stride, &p.do_head_stride,
                     &p.dq_head_stride, &p.dk_head_stride, &p.dv_head_stride}) *s = D;
  for (int64_t* s : {&p.q_row_stride, &p.k_row_stride, &p.v_row_stride, &p.o_row_stride, &p.do_row_stride,
                     &p.dq_row_stride, &p.dk_row_stride, &p.dv_row_stride}) *s = int64_t(H) * D;
  for (int64_t* s : {&p.q_batch_stride, &p.k_batch_stride, &p.v_batch_stride, &p.o_batch_stride, &p.do_batch_stride,
                     &p.dq_batch_stride, &p.dk_batch_stride, &p.dv_batch_stride}) *s = int64_t(N) * H * D;
  CK(cudaMalloc(&p.lse, size_t(B) * H * N * 4));
  CK(cudaMalloc(&P.a.dvec, size_t(B) * H * N * 4));
  CK(cudaMalloc(&P.a.dq_accum, n * 4));
  CK(cudaMemset(P.a.dvec, 0, size_t(B) * H * N * 4));
  CK(cudaMemset(p.lse, 0, size_t(B) * H * N * 4));
  // the row statistics of the fp16 / bf16 backward, laid out as the library does
  P.a.stat_plane = stat_plane_floats(p);
  CK(cudaMalloc(&P.a.row_stats, 2 * P.a.stat_plane * 4));
  CK(cudaMemset(P.a.row_stats, 0, 2 * P.a.stat_plane * 4));
  P.a.dq_accum_d = D;
  P.a.scale_log2 = p.scale * 1.4426950408889634f;
  P.a.bias_mma = true;  // as make_args (cuda_backend.cu) without overrides
  P.a.fwd_half_last = P.a.fwd_lazy_rescale = P.a.bwd_rotate = true;
  P.a.group = FastDiv::make(static_cast<uint32_t>(p.heads_q / p.heads_kv));
  P.a.keep_scale = 1.f;
  P.a.vec_ok = true;
  if (swin_nw) {
    const int64_t NN = int64_t(N) * N;
    BiasTerm rel; rel.dtype = DType::bf16; rel.head_stride = NN; rel.row_stride = N; rel.head_mod = H;
    void* r; CK(cudaMalloc(&r, H * NN * 2)); fill<<<1024, 256>>>((bf*)r, H * NN, 11); rel.ptr = r;
    CK(cudaMalloc(&rel.grad, H * NN * 4));
    BiasTerm mk; mk.dtype = DType::bf16; mk.batch_stride = NN; mk.row_stride = N; mk.batch_mod = swin_nw;
    void* m; CK(cudaMalloc(&m, swin_nw * NN * 2)); mk.ptr = m;
    const std::vector<uint16_t> hm = tessera::bench::swin_shift_mask_bf16(swin_nw);  // N = 343
    CK(cudaMemcpy(m, hm.data(), hm.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&mk.grad, swin_nw * NN * 4));
    p.bias[0] = rel; p.bias[1] = mk; p.num_bias = 2;
    P.a.any_bias_grad = true;
  }
  P.flops = 4.0 * B * H * double(N) * N * D / (causal ? 2 : 1);
  CK(cudaDeviceSynchronize());
  return P;
}

float time_ms(const std::function<void()>& f, int reps = 10) {
  const float ms = tessera::bench::median_device_ms(f, reps);
  CK(cudaGetLastError());
  return ms;
}
bool g_force_mods = false;  // time the kModsAll kernels without any modifier (what the code paths cost)
const char* const kModsName[] = {"", "  [bias only]", "  [all mods]"};

template <typename Tr>
void fwd(const char* name, const Prob& P) {
  int mods = 0;
  const float ms =
      time_ms([&] { mods = launch_fwd_tr<bf, Tr>(P.a, 0, g_force_mods ? kModsAll : mods_kind(P.a, false)); });
  std::printf("  fwd %-34s %8.3f ms %7.1f TF/s%s", name, ms, P.flops / ms * 1e-9, kModsName[mods]);
  if (P.a.qsplit != 0) std::printf("  [qsplit %d]", P.a.qsplit);
  std::printf("\n");
}

// Where the call may take the LEAN variant (d16 / d32 windows), the general kernel is timed after it.
template <typename Tr>
void bwd(const char* name, const Prob& P) {
  for (bool allow_lean : {true, false}) {
    int mods = 0;
    bool lean = false;
    const float ms = time_ms([&] {
      mods = launch_bwd_tr<bf, Tr>(P.a, 0, g_force_mods ? kModsAll : mods_kind(P.a, true), allow_lean, &lean);
    });
    std::printf("  bwd %-34s %8.3f ms %7.1f TF/s (main kernel only)%s%s\n", name, ms, 2.5 * P.flops / ms * 1e-9,
                kModsName[mods], lean ? "  [lean]" : "");
    if (!lean) break;
  }
}

#if defined(TESSERA_SM90A)
// Hopper forward: traits (D, BN, STAGES, NCONS, PINGPONG), tensor maps made per call as in the library.
template <typename Tr>
void fwd90(const char* name, const Prob& P, bool tma_store = true) {
  const float ms = time_ms([&] { launch_fwd_sm90_cfg<Tr>(P.a, 0, tma_store); });
  std::printf("  fwd90 %-32s %8.3f ms %7.1f TF/s%s\n", name, ms, P.flops / ms * 1e-9,
              tma_store ? "" : "  (O stored per thread)");
}
#define H(...) fwd90<sm90::FwdSm90Traits<bf, __VA_ARGS__>>(#__VA_ARGS__, P)
// The same with the epilogue's per-thread O stores instead of the staged TMA store.
#define HS(...) fwd90<sm90::FwdSm90Traits<bf, __VA_ARGS__>>(#__VA_ARGS__, P, false)
#endif

// Fragment-ordered copies of the bias terms (bias_pack.cu), as the library makes them per
// call: the forward's ([query][key]) or the backward's ([key][query], with packed dBias).
// Returns the prepared args; prints what the packing itself costs.
KArgs packed_args(const Prob& P, bool trans) {
  KArgs a = P.a;
  for (int t = 0; t < a.p.num_bias; ++t) {
    if (!bias_packable(a.p, t)) continue;
    void* buf;
    CK(cudaMalloc(&buf, packed_bias_bytes(a.p, t)));
    const float ms = time_ms([&] { pack_bias(a.p, t, trans, buf, 0); });
    std::printf("  pack term %d (%s) %8.3f ms, %.1f MB\n", t, trans ? "bwd" : "fwd", ms,
                packed_bias_bytes(a.p, t) / 1e6);
    a.pk[t] = pack_bias(a.p, t, trans, buf, 0);
    if (trans && a.any_bias_grad && a.p.bias[t].grad) {
      CK(cudaMalloc(&a.pk[t].grad, packed_grad_bytes(a.p, t)));
      CK(cudaMemset(a.pk[t].grad, 0, packed_grad_bytes(a.p, t)));
    }
  }
  CK(cudaDeviceSynchronize());
  return a;
}

#define F(...) fwd<FwdTraits<bf, __VA_ARGS__>>(#__VA_ARGS__, P)
#define Bw(...) bwd<BwdTraits<bf, __VA_ARGS__>>(#__VA_ARGS__, P)
// The same traits with the LEAN kernels' skipping of empty warp tiles turned off
template <typename Base>
struct NoSkipEmpty : Base {
  static constexpr int kSkipEmpty = 0;
};
#define BwNoSkip(...) bwd<NoSkipEmpty<BwdTraits<bf, __VA_ARGS__>>>(#__VA_ARGS__ " no skip", P)
// ... and with the P^T / dS^T fragments stored by 32-bit stores instead of stmatrix
template <typename Base>
struct NoStMatrix : Base {
  static constexpr int kStMatrix = 0;
};
#define BwNoStm(...) bwd<NoStMatrix<BwdTraits<bf, __VA_ARGS__>>>(#__VA_ARGS__ " no stmatrix", P)

#if defined(TESSERA_SM90A)
// The Hopper forward's configurations over short and long, causal and not: two consumer
// warpgroups ping-ponging in one CTA per SM (shipping) against one consumer in two or three
// CTAs per SM, with or without a producer warpgroup. Traits: D, BN, STAGES, NCONS, PINGPONG, MINB[, PRODUCER
// [, PERSIST]].
void sweep_fwd90(int only_d) {  // only_d: 0 = every head dim
  struct S { const char* name; int B, N, H, D; bool causal; };
  const S shapes[] = {{"ViT-B tiles N197 B256 H12 d64", 256, 197, 12, 64, false},
                      {"VideoMAE-B N1568 B8 H12 d64", 8, 1568, 12, 64, false},
                      {"d64 N1024 B16 H32", 16, 1024, 32, 64, false},
                      {"d64 N2048 B8 H32", 8, 2048, 32, 64, false},
                      {"d64 N8192 B2 H32", 2, 8192, 32, 64, false},
                      {"d64 causal N1024 B16 H32", 16, 1024, 32, 64, true},
                      {"d64 causal N2048 B8 H32", 8, 2048, 32, 64, true},
                      {"d64 causal N4096 B4 H32", 4, 4096, 32, 64, true},
                      {"d64 causal N8192 B2 H32", 2, 8192, 32, 64, true},
                      {"d128 N512 B32 H16", 32, 512, 16, 128, false},
                      {"d128 N1024 B16 H16", 16, 1024, 16, 128, false},
                      {"d128 N2048 B8 H16", 8, 2048, 16, 128, false},
                      {"d128 N8192 B2 H16", 2, 8192, 16, 128, false},
                      {"d128 causal N512 B32 H16", 32, 512, 16, 128, true},
                      {"d128 causal N1024 B16 H16", 16, 1024, 16, 128, true},
                      {"d128 causal N8192 B2 H16", 2, 8192, 16, 128, true}};
  for (const S& s : shapes) {
    if (only_d && s.D != only_d) continue;
    std::printf("%s%s\n", s.name, "");
    Prob P = make(s.B, s.N, s.H, s.D, s.causal, 0);
    if (s.D == 64) {
      H(64, 128, 4, 2, true, 1);  // shipped until 2026-12-01
      H(64, 128, 3, 1, false, 2); H(64, 64, 4, 1, false, 3);
      H(64, 128, 2, 1, false, 2); H(64, 64, 3, 1, false, 3); H(64, 64, 6, 1, false, 2);
      // no producer warpgroup: 128-thread CTAs, the consumer issues its own loads
      H(64, 64, 2, 1, false, 4, false); H(64, 64, 4, 1, false, 3, false);
      H(64, 128, 2, 1, false, 3, false);  // shipping (tile_configs.cuh) beyond 208 keys
      HS(64, 128, 2, 1, false, 3, false);
      // the same persistent (a configuration the library dropped: it lost at every length), and with a 3-deep ring in two CTAs
      if (s.N > 208) { H(64, 128, 2, 1, false, 3, false, true); H(64, 128, 3, 1, false, 2, false, true); }
      // persistent ping-pong pair with a producer, causal tiles in heavy / light pairs (as d128 ships it;
      // fixed-length calls only: launch_fwd_sm90_cfg refuses the others), against the d64 forward's gap at
      // N2k (0.97x cuDNN, causal 0.94x; 2026-12-02)
      if (s.N > 208) { H(64, 128, 3, 2, true, 1, true, true); H(64, 128, 4, 2, true, 1, true, true); }
      if (s.N <= 208) {  // one block holds the row
        H(64, 208, 1, 1, false, 3, false);  // shipping for 129..208 keys
        HS(64, 208, 1, 1, false, 3, false);
        H(64, 208, 1, 1, false, 2, false);
      }
    } else {
      H(128, 128, 3, 2, true, 1);  // shipping
      HS(128, 128, 3, 2, true, 1);
      H(128, 64, 2, 1, false, 2);
      // short rows (d128 N512-1k at 0.79-0.86x cuDNN): shallower rings and narrower blocks, which long rows
      // lost with, untried where a CTA runs only 4-8 key blocks
      H(128, 128, 2, 2, true, 1); H(128, 64, 4, 2, true, 1); H(128, 64, 5, 2, false, 1);
    }
  }
}
#endif

void swin();
void swin_fwd();
void swin_ab();

int main(int argc, char** argv) {
#if defined(TESSERA_SM90A)
  int cc_major = 0;
  CK(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, 0));
  const bool sm90 = cc_major == 9;  // the sm_90a image runs on compute 9.0 only
  if (argc > 1 && std::string(argv[1]) == "fwd90") {
    if (sm90) sweep_fwd90(argc > 2 ? std::atoi(argv[2]) : 0);
    return 0;
  }
#endif
  if (argc > 1 && std::string(argv[1]) == "swin") {
    swin();
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "swin-fwd") {
    swin_fwd();
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "swin-ab") {
    swin_ab();
    return 0;
  }
  for (bool causal : {false, true}) {
    {
      std::printf("d64 N8192 B2 H32 %s\n", causal ? "causal" : "");
      Prob P = make(2, 8192, 32, 64, causal, 0);
      F(64, 4, 64, 2); F(64, 4, 128, 2); F(64, 8, 128, 1);
      Bw(64, 8, 128, 64, 4, 4, 4); Bw(64, 8, 128, 64, 4, 8, 4); Bw(64, 8, 128, 128, 4, 8, 8);
      Bw(64, 4, 64, 64, 0, 0, 0, 3, 2);  // 12 warps / SM (168 registers, small spill)
#if defined(TESSERA_SM90A)
      if (sm90) {
        H(64, 128, 4, 2, true);  // shipping (tile_configs.cuh)
        H(64, 128, 2, 3, true); H(64, 128, 2, 3, false); H(64, 64, 4, 3, false);  // BM 192, as FA3 at d64
      }
#endif
    }
    {
      std::printf("d128 N8192 B2 H16 %s\n", causal ? "causal" : "");
      Prob P = make(2, 8192, 16, 128, causal, 0);
      F(128, 8, 64, 1); F(128, 4, 32, 2, false); F(128, 8, 32, 2, false);
      Bw(128, 8, 128, 64, 4, 8, 4); Bw(128, 8, 128, 64, 4, 4, 4); Bw(128, 8, 128, 32, 4, 8, 2);
      Bw(128, 8, 128, 64, 4, 4, 2);  // dQ warp tiles 32x32 (FA2's): 32 instead of 40 ldmatrix per warp
#if defined(TESSERA_SM90A)
      if (sm90) {
        H(128, 128, 3, 2, true);  // shipping (tile_configs.cuh)
        H(128, 64, 5, 2, false); H(128, 128, 2, 2, false);
      }
#endif
    }
  }
  swin();
  return 0;
}

// The shipped Swin kernels (model's case: packed relative bias + shift mask, dBias of the relative
// bias only) with the bias adds on the CUDA cores, then on the tensor cores (KArgs::bias_mma), twice
// in alternation; the forward without bias for reference.
void swin_fwd() {
  for (int d : {16, 32}) {
    Prob P0 = d == 16 ? make(1372, 343, 3, 16, false, 343) : make(2048, 343, 6, 32, false, 512);
    Prob P = P0;
    P.a = packed_args(P0, false);
    std::printf("Swin d%d rel+mask, packed bias, forward: bias adds on CUDA cores / tensor cores (x2)\n", d);
    for (int rep = 0; rep < 2; ++rep)
      for (bool mma : {false, true}) {
        P.a.bias_mma = mma;
        if (d == 16) F(16, 8, 64, 1, true, true, 2);
        else F(32, 4, 64, 1, true, true, 4);
      }
    // Other shapes of the kModsBias forward (tensor-core adds) since the leaner tile copies (fourteenth
    // session: the 11-warp CTAs, 176 rows, lost there; the shipped shapes are printed above)
    std::printf("Swin d%d forward, tensor-core bias, other shapes (x2)\n", d);
    P.a.bias_mma = true;
    for (int rep = 0; rep < 2; ++rep) {
      if (d == 16) { F(16, 4, 64, 1, true, true, 4); F(16, 8, 64, 1, true, true, 3); F(16, 8, 128, 1, true, true, 2); }
      else { F(32, 8, 64, 1, true, true, 2); F(32, 4, 64, 1, true, true, 3); F(32, 4, 128, 1, true, true, 2); }
    }
    // the shipped shapes with 1 / 2 / 3 CTAs per window and head, each running its share of the query
    // blocks in turn (FwdTraits QSPLIT)
    std::printf("Swin d%d forward, tensor-core bias, QSPLIT 1 / 2 / 3 (x2)\n", d);
    for (int rep = 0; rep < 2; ++rep) {
      if (d == 16) { F(16, 8, 64, 1, true, true, 2, 1); F(16, 8, 64, 1, true, true, 2, 2); F(16, 8, 64, 1, true, true, 2, 3); }
      else { F(32, 4, 64, 1, true, true, 4, 1); F(32, 4, 64, 1, true, true, 4, 2); F(32, 4, 64, 1, true, true, 4, 3); }
    }
    P.a = packed_args(P0, true);
    P.a.p.bias[1].grad = nullptr;
    P.a.pk[1].grad = nullptr;
    std::printf("Swin d%d backward (dBias of the relative bias): CUDA cores / tensor cores (x2)%s\n", d,
                d == 16 ? ", LEAN then WIN" : "");
    for (int rep = 0; rep < 2; ++rep)
      for (bool mma : {false, true}) {
        P.a.bias_mma = mma;
        if (d == 16) {
          Bw(16, 8, 128, 64, 4, 8, 4, 2, 2);
          P.a.win = true;
          Bw(16, 8, 128, 64, 4, 8, 4, 2, 2);
          P.a.win = false;
        } else {
          Bw(32, 8, 128, 64, 4, 8, 4, 2, 2); Bw(32, 8, 128, 32, 4, 8, 2, 2, 2);
        }
      }
    // WIN shapes: d16 as shipped; d32 (the LEAN traits' WIN needs
    // 150 KB, one CTA per SM): 8 warps over 128 keys x 32 queries, 4 warps over 64 x 64, 8 over 64 x 64
    std::printf("Swin d%d WIN backward shapes, tensor-core bias (x2)\n", d);
    P.a.bias_mma = true;
    P.a.win = true;
    for (int rep = 0; rep < 2; ++rep) {
      if (d == 16) {
        Bw(16, 8, 128, 64, 4, 8, 4, 2, 2);
      } else {
        Bw(32, 8, 128, 64, 4, 8, 4, 2, 2); Bw(32, 8, 128, 32, 4, 8, 2, 2, 2); Bw(32, 4, 64, 64, 4, 4, 4, 2, 2);
        Bw(32, 8, 64, 64, 4, 4, 4, 2, 2);
      }
    }
    P.a.win = false;
    std::printf("Swin d%d without bias, forward\n", d);
    P = d == 16 ? make(1372, 343, 3, 16, false, 0) : make(2048, 343, 6, 32, false, 0);
    if (d == 16) { F(16, 4, 64, 1, true, true, 4); F(16, 4, 64, 1, true, true, 4, 2); F(16, 4, 64, 1, true, true, 4, 3); }
    else { F(32, 4, 64, 1, true, true, 4); F(32, 4, 64, 1, true, true, 4, 2); F(32, 4, 64, 1, true, true, 4, 3); }
  }
}

// The shipped Swin d16 / d32 kernels (tensor-core bias) beside their closest alternatives, in five
// alternating rounds: differences of a few per cent that separate tune runs (and the GPU's warming
// over one) blur. Forward, with and without bias: one CTA per query block against 1 / 2 CTAs per window
// and head (QSPLIT, whose query blocks run as one pipeline);
// backward: the WIN kernel as built, without skipping empty warp tiles (BwdTraits::kSkipEmpty) and with
// 32-bit P^T / dS^T stores instead of stmatrix (BwdTraits::kStMatrix).
void swin_ab() {
  for (int d : {16, 32}) {
    Prob P0 = d == 16 ? make(1372, 343, 3, 16, false, 343) : make(2048, 343, 6, 32, false, 512);
    Prob P = P0;
    P.a = packed_args(P0, false);
    P.a.bias_mma = true;
    // (QSPLIT 1 with qsplit -1: the query loop compiled in, one CTA per query block: the library's kernel)
    auto qsplit_rows = [&](auto f0, auto f1) {
      f0();
      P.a.qsplit = -1;
      f1();
      P.a.qsplit = 1;
      f1();
      P.a.qsplit = 2;
      f1();
      P.a.qsplit = 0;
    };
    std::printf("Swin d%d rel+mask forward: no query loop; loop with 1 CTA per block, QSPLIT 1, 2 (x5)\n", d);
    for (int rep = 0; rep < 5; ++rep) {
      if (d == 16) qsplit_rows([&] { F(16, 8, 64, 1, true, true, 2); }, [&] { F(16, 8, 64, 1, true, true, 2, 1); });
      else qsplit_rows([&] { F(32, 4, 64, 1, true, true, 4); }, [&] { F(32, 4, 64, 1, true, true, 4, 1); });
    }
    {
      Prob Pn = d == 16 ? make(1372, 343, 3, 16, false, 0) : make(2048, 343, 6, 32, false, 0);
      std::swap(P, Pn);
      std::printf("Swin d%d forward without bias: no query loop; loop with 1 CTA per block, QSPLIT 1, 2 (x5)\n", d);
      for (int rep = 0; rep < 5; ++rep) {
        if (d == 16) qsplit_rows([&] { F(16, 4, 64, 1, true, true, 4); }, [&] { F(16, 4, 64, 1, true, true, 4, 1); });
        else qsplit_rows([&] { F(32, 4, 64, 1, true, true, 4); }, [&] { F(32, 4, 64, 1, true, true, 4, 1); });
      }
      std::swap(P, Pn);
    }
    P.a = packed_args(P0, true);
    P.a.p.bias[1].grad = nullptr;
    P.a.pk[1].grad = nullptr;
    P.a.bias_mma = true;
    P.a.win = true;
    std::printf("Swin d%d WIN backward: as built, empty warp tiles not skipped, no stmatrix (x3)\n", d);
    for (int rep = 0; rep < 3; ++rep) {
      if (d == 16) { Bw(16, 8, 128, 64, 4, 8, 4, 2, 2); BwNoSkip(16, 8, 128, 64, 4, 8, 4, 2, 2); BwNoStm(16, 8, 128, 64, 4, 8, 4, 2, 2); }
      else { Bw(32, 8, 128, 32, 4, 8, 2, 2, 2); BwNoSkip(32, 8, 128, 32, 4, 8, 2, 2, 2); BwNoStm(32, 8, 128, 32, 4, 8, 2, 2, 2); }
    }
  }
}

// The Swin UNETR window shapes, bias read in place (gathers) and from packed copies.
void swin() {
  {
    std::printf("Swin d16 1372x3x343 rel+mask\n");
    Prob P = make(1372, 343, 3, 16, false, 343);
    F(16, 4, 64, 1); F(16, 2, 64, 1); F(16, 4, 128, 1); F(16, 8, 64, 1);
    Bw(16, 4, 64, 64); Bw(16, 8, 128, 64, 4, 8, 4); Bw(16, 4, 64, 64, 2, 4, 4); Bw(16, 2, 64, 64);
    Bw(16, 4, 64, 64, 0, 0, 0, 4, 3);  // the default (BwdCfg): 16 / 12 warps per SM
    P.a.any_bias_grad = false;
    std::printf(" (no dbias atomics)\n");
    Bw(16, 4, 64, 64);
  }
  {
    std::printf("Swin d32 2048x6x343 rel+mask\n");
    Prob P = make(2048, 343, 6, 32, false, 512);
    F(32, 4, 64, 1); F(32, 2, 64, 1); F(32, 4, 128, 1);
    Bw(32, 4, 64, 64); Bw(32, 8, 128, 64, 4, 8, 4); Bw(32, 4, 64, 64, 2, 4, 4);
    Bw(32, 4, 64, 64, 0, 0, 0, 4, 3);  // the default (BwdCfg)
  }
  for (int d : {16, 32}) {
    std::printf("Swin d%d %s without bias: plain kernels, then the MODS ones\n", d, d == 16 ? "1372x3x343" : "2048x6x343");
    Prob P = d == 16 ? make(1372, 343, 3, 16, false, 0) : make(2048, 343, 6, 32, false, 0);
    for (bool m : {false, true}) {
      g_force_mods = m;
      if (d == 16) { F(16, 4, 64, 1); Bw(16, 4, 64, 64, 0, 0, 0, 4, 3); }
      else { F(32, 4, 64, 1); Bw(32, 4, 64, 64, 0, 0, 0, 4, 3); }
    }
    g_force_mods = false;
  }
  for (int d : {16, 32}) {
    std::printf("Swin d%d %s rel+mask, packed bias\n", d, d == 16 ? "1372x3x343" : "2048x6x343");
    Prob P0 = d == 16 ? make(1372, 343, 3, 16, false, 343) : make(2048, 343, 6, 32, false, 512);
    Prob P = P0;
    P.a = packed_args(P0, false);
    if (d == 16) { F(16, 4, 64, 1); F(16, 8, 64, 1); F(16, 4, 128, 1); }
    else { F(32, 4, 64, 1); F(32, 8, 64, 1); F(32, 4, 128, 1); }
    P.a = packed_args(P0, true);
    std::printf(" dBias of both terms\n");
    if (d == 16) { Bw(16, 4, 64, 64, 0, 0, 0, 4, 3); Bw(16, 4, 64, 64); Bw(16, 8, 128, 64, 4, 8, 4); }
    else { Bw(32, 4, 64, 64, 0, 0, 0, 4, 3); Bw(32, 4, 64, 64); Bw(32, 8, 128, 64, 4, 8, 4); }
    std::printf(" dBias of the relative bias only (the model's case)\n");
    P.a.p.bias[1].grad = nullptr;
    P.a.pk[1].grad = nullptr;
    if (d == 16) {
      Bw(16, 4, 64, 64, 0, 0, 0, 4, 3); Bw(16, 8, 128, 64, 4, 8, 4); Bw(16, 8, 128, 64, 4, 8, 4, 2, 2);
      // WIN: one CTA per window and head (the kernel also does the row-statistics pass, the dQ memset and
      // conversion that the LEAN rows above leave to the op: bench/attention_cuda_bench.py times both whole)
      std::printf(" WIN (one CTA per window and head)\n");
      P.a.win = true;
      Bw(16, 8, 128, 64, 4, 8, 4, 2, 2);
      P.a.win = false;
    } else { Bw(32, 4, 64, 64, 0, 0, 0, 4, 3); Bw(32, 8, 128, 64, 4, 8, 4); Bw(32, 8, 128, 64, 4, 8, 4, 2, 2); }
    std::printf(" no dBias\n");
    P.a.any_bias_grad = false;
    P.a.pk[0].grad = nullptr;
    if (d == 16) Bw(16, 4, 64, 64, 0, 0, 0, 4, 3); else Bw(32, 4, 64, 64, 0, 0, 0, 4, 3);
    // what the windows whose shift mask is all zero (216 of 343, 343 of 512) would cost if
    // the mask term were dropped for them: the relative bias alone, with its dBias
    std::printf(" the relative bias alone (one term), with its dBias\n");
    Prob P1 = P0;
    P1.a.p.num_bias = 1;
    P.a = packed_args(P1, false);
    if (d == 16) F(16, 4, 64, 1); else F(32, 4, 64, 1);
    P.a = packed_args(P1, true);
    if (d == 16) Bw(16, 4, 64, 64, 0, 0, 0, 4, 3); else Bw(32, 4, 64, 64, 0, 0, 0, 4, 3);
  }
}
