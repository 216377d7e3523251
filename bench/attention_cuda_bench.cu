// Times the CUDA attention kernels alone (cudaEvents, median of repeats) on
// the FlashAttention grid and the project's own shapes. The comparison with
// PyTorch SDPA lives in attention_cuda_bench.py (needs the LibTorch op).
//
//   attention_cuda_bench [--quick] [--only SUBSTRING] [--reps N] [--fwd-only] [--set NAME=VALUE]...
// (--only runs the cases whose name holds SUBSTRING, e.g. for a profiler; --fwd-only times the
// forward alone, the other columns 0: a third of the time for forward A / Bs, tools/gpu/gpu_ab.sh -c fwd;
// --set forces a kernel choice, cuda::Overrides by name (docs/attention.md "Options"): the A / B arms.)
// FLOPs by the FlashAttention formula: 4 B H Nq Nk d (/2 causal), bwd 2.5x, fwd+bwd 3.5x.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda_event_timer.cuh"
#include "swin_shift_mask.h"
#include "tessera/attention/layout.h"
#include "tessera/attention/params.h"

namespace ta = tessera::attention;

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

__global__ void fill_bf16(__nv_bfloat16* p, size_t n, uint32_t seed, float sigma) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    x ^= x >> 13; x *= 0x5bd1e995u; x ^= x >> 15;
    const float u = (x & 0xFFFFFF) / float(0x1000000) - 0.5f;
    p[i] = __float2bfloat16(u * sigma * 3.4641f);  // uniform with std sigma
  }
}

void* dalloc(size_t bytes) {
  void* p = nullptr;
  CK(cudaMalloc(&p, bytes));
  return p;
}
void fill(void* p, size_t n, uint32_t seed, float sigma = 1.f) {
  fill_bf16<<<1024, 256>>>(static_cast<__nv_bfloat16*>(p), n, seed, sigma);
  CK(cudaGetLastError());
}

struct Shape {
  std::string name;
  int B, N, Hq, Hkv, D;
  bool causal;
  int swin_nw = 0;  // > 0: rel-pos bias [H, N, N] (with grad) + Swin's shift mask [nW, N, N]
  bool deterministic = false;
  bool mask_grad = false;  // the shift mask's gradient too (the Swin model's mask is a constant)
  bool rel_grad = true;    // the relative bias's gradient (off: the bias costs without dBias, for profiles)
};

template <typename F>
float time_ms(F&& f, int reps) { return tessera::bench::median_device_ms(f, reps); }

void run(const Shape& s, int reps, bool fwd_only, const ta::cuda::Overrides& ov) {
  ta::AttentionParams p;
  p.device = ta::Device::cuda;
  p.dtype = ta::DType::bf16;
  p.batch = s.B; p.seqlen_q = p.seqlen_k = s.N; p.heads_q = s.Hq; p.heads_kv = s.Hkv;
  p.head_dim = p.head_dim_v = s.D;
  p.scale = 1.f / std::sqrt(float(s.D));
  p.causal = s.causal;
  p.deterministic = s.deterministic;
  const size_t nq = size_t(s.B) * s.N * s.Hq * s.D, nk = size_t(s.B) * s.N * s.Hkv * s.D;
  void *q = dalloc(nq * 2), *k = dalloc(nk * 2), *v = dalloc(nk * 2), *o = dalloc(nq * 2), *dO = dalloc(nq * 2);
  void *dq = dalloc(nq * 2), *dk = dalloc(nk * 2), *dv = dalloc(nk * 2);
  float* lse = static_cast<float*>(dalloc(size_t(s.B) * s.Hq * s.N * 4));
  fill(q, nq, 1); fill(k, nk, 2); fill(v, nk, 3); fill(dO, nq, 4);
  auto set = [&](int64_t& bs, int64_t& rs, int64_t& hs, int H) { hs = s.D; rs = int64_t(H) * s.D; bs = rs * s.N; };
  set(p.q_batch_stride, p.q_row_stride, p.q_head_stride, s.Hq);
  set(p.o_batch_stride, p.o_row_stride, p.o_head_stride, s.Hq);
  set(p.do_batch_stride, p.do_row_stride, p.do_head_stride, s.Hq);
  set(p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride, s.Hq);
  set(p.k_batch_stride, p.k_row_stride, p.k_head_stride, s.Hkv);
  set(p.v_batch_stride, p.v_row_stride, p.v_head_stride, s.Hkv);
  set(p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride, s.Hkv);
  set(p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride, s.Hkv);
  p.q = q; p.k = k; p.v = v; p.o = o; p.lse = lse; p.dout = dO; p.dq = dq; p.dk = dk; p.dv = dv;
  std::vector<void*> extra;
  if (s.swin_nw > 0) {
    const int64_t NN = int64_t(s.N) * s.N;
    ta::BiasTerm rel;  // [H, N, N], shared by all windows
    rel.dtype = ta::DType::bf16; rel.head_stride = NN; rel.row_stride = s.N; rel.head_mod = s.Hq;
    rel.ptr = dalloc(s.Hq * NN * 2); fill(const_cast<void*>(rel.ptr), s.Hq * NN, 5);
    rel.grad = s.rel_grad ? static_cast<float*>(dalloc(s.Hq * NN * 4)) : nullptr;
    ta::BiasTerm mask;  // [nW, N, N], shared by heads, tiled over the batch
    mask.dtype = ta::DType::bf16; mask.batch_stride = NN; mask.row_stride = s.N; mask.batch_mod = s.swin_nw;
    mask.ptr = dalloc(s.swin_nw * NN * 2);
    const std::vector<uint16_t> hm = tessera::bench::swin_shift_mask_bf16(s.swin_nw);  // N = 343
    CK(cudaMemcpy(const_cast<void*>(mask.ptr), hm.data(), hm.size() * 2, cudaMemcpyHostToDevice));
    mask.grad = s.mask_grad ? static_cast<float*>(dalloc(s.swin_nw * NN * 4)) : nullptr;
    p.bias[0] = rel; p.bias[1] = mask; p.num_bias = 2;
    extra = {const_cast<void*>(rel.ptr), rel.grad, const_cast<void*>(mask.ptr)};
    if (mask.grad) extra.push_back(mask.grad);
  }
  const size_t wsb = ta::cuda::backward_workspace_bytes(p, ov);
  p.workspace = wsb ? dalloc(wsb) : nullptr;

  double flops = 4.0 * s.B * s.Hq * double(s.N) * s.N * s.D;
  if (s.causal) flops /= 2;
  ta::cuda::forward(p, ov);
  CK(cudaDeviceSynchronize());
  const float tf = time_ms([&] { ta::cuda::forward(p, ov); }, reps);
  // The same forward on the portable kernels, where the Hopper path ran.
  ta::cuda::Overrides portable = ov;
  portable.portable = true;
  const std::string kname = ta::cuda::forward_kernel(p, ov);
  float tfp = tf;
  if (kname.rfind("sm90", 0) == 0 && !fwd_only) tfp = time_ms([&] { ta::cuda::forward(p, portable); }, reps);
  const float tb = fwd_only ? 0.f : time_ms([&] { ta::cuda::backward(p, ov); }, reps);
  const std::string bname = ta::cuda::backward_kernel(p, ov);
  float tbp = tb;
  if (bname.rfind("sm90", 0) == 0 && !fwd_only) tbp = time_ms([&] { ta::cuda::backward(p, portable); }, reps);
  const float tfb =
      fwd_only ? 0.f : time_ms([&] { ta::cuda::forward(p, ov); ta::cuda::backward(p, ov); }, reps);
  std::printf("| %-34s | %s / %s | %8.3f | %6.1f | %6.1f | %8.3f | %6.1f | %6.1f | %8.3f | %6.1f |\n", s.name.c_str(),
              kname.c_str(), bname.c_str(), tf, flops / tf * 1e-9, flops / tfp * 1e-9, tb, 2.5 * flops / tb * 1e-9,
              2.5 * flops / tbp * 1e-9, tfb, 3.5 * flops / tfb * 1e-9);
  std::fflush(stdout);
  for (void* x : {q, k, v, o, dO, dq, dk, dv, static_cast<void*>(lse), p.workspace}) if (x) CK(cudaFree(x));
  for (void* x : extra) CK(cudaFree(x));
}

int main(int argc, char** argv) {
  bool quick = false, fwd_only = false;
  std::string only, settings;
  int reps = 0;
  ta::cuda::Overrides ov;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--fwd-only") fwd_only = true;
    else if (a == "--set" && i + 1 < argc) {
      try {
        ta::cuda::apply_override(ov, argv[++i]);
      } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "attention_cuda_bench: %s\n", e.what());
        return 2;
      }
      settings += std::string(" ") + argv[i];
    } else {
      std::fprintf(stderr,
                   "usage: attention_cuda_bench [--quick] [--only SUBSTRING] [--reps N] [--fwd-only] [--set NAME=VALUE]...\n");
      return 2;
    }
  }
  if (reps == 0) reps = quick ? 5 : 20;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, bf16, median of %d%s%s\n\n", prop.name, reps, settings.empty() ? "" : ", overrides:",
              settings.c_str());
  std::printf("| case | fwd / bwd kernel | fwd ms | fwd TF/s | portable fwd TF/s | bwd ms | bwd TF/s | portable bwd TF/s |"
              " fwd+bwd ms | f+b TF/s |\n|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<Shape> shapes;
  for (int D : {64, 128})
    for (bool causal : {false, true})
      for (int N : {512, 1024, 2048, 4096, 8192, 16384}) {
        if (quick && N != 1024 && N != 8192) continue;
        const int H = 2048 / D, B = 16384 / N;
        shapes.push_back({"d" + std::to_string(D) + (causal ? " causal" : "") + " N" + std::to_string(N) + " B" +
                              std::to_string(B) + " H" + std::to_string(H),
                          B, N, H, H, D, causal});
      }
  shapes.push_back({"ViT-B tiles N197 B256 H12 d64", 256, 197, 12, 12, 64, false});
  // fine-tuning tile encoders: a short row's last key block holds a few keys (197 = 3 x 64 + 5, 261 = 2 x 128 + 5)
  shapes.push_back({"ViT tiles N197 B512 H12 d64", 512, 197, 12, 12, 64, false});
  shapes.push_back({"ViT-g tiles N261 B128 H24 d64", 128, 261, 24, 24, 64, false});
  shapes.push_back({"ViT-B slide N32k H12 d64", 1, 32768, 12, 12, 64, false});
  if (!quick) shapes.push_back({"ViT-B slide N64k H12 d64", 1, 65536, 12, 12, 64, false});
  shapes.push_back({"GQA 32/8 d128 N4k B4 causal", 4, 4096, 32, 8, 128, true});
  // groups of 8 and 4 with few kv heads: whole groups per tile are under a wave (head splits, dispatch.cu)
  shapes.push_back({"GQA 16/2 d128 N8k B1 causal", 1, 8192, 16, 2, 128, true});
  shapes.push_back({"GQA 16/2 d128 N8k B1", 1, 8192, 16, 2, 128, false});
  shapes.push_back({"GQA 32/8 d128 N4k B1 causal", 1, 4096, 32, 8, 128, true});
  shapes.push_back({"d256 N4k B2 H8", 2, 4096, 8, 8, 256, false});
  shapes.push_back({"d256 N4k B2 H8 causal", 2, 4096, 8, 8, 256, true});
  // a slide as one sequence, against its 16k throughput: seconds a call at 1M keys, so only when --only names "long"
  if (only.find("long") != std::string::npos)
    for (int D : {64, 128})
      for (bool causal : {false, true})
        for (int N : {16384, 262144, 1048576}) {
          const int H = D == 64 ? 12 : 8;
          shapes.push_back({"long d" + std::to_string(D) + (causal ? " causal" : "") + " N" + std::to_string(N >> 10) + "k B1 H" +
                                std::to_string(H),
                            1, N, H, H, D, causal});
        }
  shapes.push_back({"Swin 1372x3x343 d16 relbias+mask", 1372, 343, 3, 3, 16, false, 343});
  shapes.push_back({"Swin 2048x6x343 d32 relbias+mask", 2048, 343, 6, 6, 32, false, 512});
  shapes.push_back({"Swin 1372x3x343 d16 both grads", 1372, 343, 3, 3, 16, false, 343, false, true});
  shapes.push_back({"Swin 1372x3x343 d16 deterministic", 1372, 343, 3, 3, 16, false, 343, true});
  // the same windows without any dBias and without bias: what the bias and its gradient cost
  shapes.push_back({"Swin 1372x3x343 d16 no dbias", 1372, 343, 3, 3, 16, false, 343, false, false, false});
  shapes.push_back({"Swin 1372x3x343 d16 no bias", 1372, 343, 3, 3, 16, false, 0});
  shapes.push_back({"d128 N8192 B2 H16 deterministic", 2, 8192, 16, 16, 128, false, 0, true});
  for (const Shape& s : shapes)
    if (only.empty() || s.name.find(only) != std::string::npos) run(s, reps, fwd_only, ov);
  return 0;
}
