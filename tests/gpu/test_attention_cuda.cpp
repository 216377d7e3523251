// GPU tests of the CUDA attention backend against the float64 reference.
// Every case draws fresh random inputs, poisons every output with NaN,
// runs forward and backward on the GPU and compares O, LSE, dQ, dK, dV and
// dBias with the reference computed on the same (rounded) inputs. Every
// feature runs in bf16 and f16 (tensor-core kernels) and in float32 (the
// exact SIMT kernels, held to 1e-4 relative error).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "reference.h"
#include "tessera/attention/half.h"
#include "tessera/attention/layout.h"
#include "tessera/attention/params.h"

namespace ta = tessera::attention;

namespace {

// The kernel choices this test forces (cuda::Overrides; none by default), and how many backward
// calls took the WIN variant.
ta::cuda::Overrides g_ov;
uint64_t g_win_runs = 0;

#define CK(x) ASSERT_EQ((x), cudaSuccess) << #x << ": " << cudaGetErrorString(x)

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device"

std::mt19937_64& rng() {
  static std::mt19937_64 g(std::random_device{}());
  return g;
}

// A host tensor of float32, float16 or bfloat16 elements (values rounded to the dtype).
struct HostT {
  ta::DType t = ta::DType::f32;
  std::vector<uint8_t> bytes;
  void* data() { return bytes.data(); }
  size_t esize() const { return static_cast<size_t>(ta::dtype_size(t)); }
};

HostT make_host(const std::vector<float>& vals, ta::DType t) {
  HostT h;
  h.t = t;
  h.bytes.resize(vals.size() * h.esize());
  for (size_t i = 0; i < vals.size(); ++i) ta::store_from_float(h.data(), static_cast<int64_t>(i), t, vals[i]);
  return h;
}

struct BiasSpec {
  bool on = false;
  ta::DType dtype = ta::DType::f32;
  int batch_mod = 1, head_mod = 1;  // distinct slices
  bool bcast_batch = false, bcast_head = false, bcast_rows = false;  // stride-0 broadcast
  bool grad = true;
  float neg_inf_frac = 0.f;  // fraction of -inf entries (masks)
  // Slices (in [batch][head] order) that are zero, as the Swin shift mask in most windows:
  // s % 4 == 0 all +0, s % 4 == 2 all -0, s % 4 == 1 zero but for its last row and column's
  // value (the packed live flags, and the kernels leaving a zero last term out), s % 4 == 3 random.
  bool zero_slices = false;
};

struct Case {
  std::string name;
  ta::DType dtype = ta::DType::bf16;
  int B = 2, Nq = 65, Nk = 65, Hq = 2, Hkv = 2, D = 64, Dv = -1;
  bool causal = false;
  int wl = -1, wr = -1;
  BiasSpec bias[2];
  bool alibi = false;
  float dropout = 0.f;
  std::vector<int> varlen_q, varlen_k;  // sequence lengths (varlen when non-empty)
  bool dlse = false;
  bool deterministic = false;
  bool packed_qkv = false;  // q, k, v as views into one [B, N, 3, H, D] tensor
  bool backward = true;
  float scale = 0.f;  // 0: 1 / sqrt(D)
  float k_ramp = 0.f; // fixed length: key j's values scaled by 1 + k_ramp * j / Nk (row maxima climbing)
};

struct DevBuf {
  void* p = nullptr;
  size_t n = 0;
  DevBuf() = default;
  explicit DevBuf(size_t bytes) : n(bytes) { if (bytes) cudaMalloc(&p, bytes); }
  ~DevBuf() { if (p) cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p(o.p), n(o.n) { o.p = nullptr; o.n = 0; }
  DevBuf& operator=(DevBuf&& o) noexcept { std::swap(p, o.p); std::swap(n, o.n); return *this; }
};

template <typename V>
DevBuf upload(const std::vector<V>& h) {
  DevBuf d(h.size() * sizeof(V) + 16);
  if (!h.empty()) cudaMemcpy(d.p, h.data(), h.size() * sizeof(V), cudaMemcpyHostToDevice);
  return d;
}
template <typename V>
std::vector<V> download(const DevBuf& d, size_t n) {
  std::vector<V> h(n);
  if (n) cudaMemcpy(h.data(), d.p, n * sizeof(V), cudaMemcpyDeviceToHost);
  return h;
}

double rel_err(const std::vector<double>& x, const std::vector<double>& ref, int* nan_count) {
  double num = 0, den = 0;
  *nan_count = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(x[i])) { ++*nan_count; continue; }
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  if (den == 0) return std::sqrt(num);
  return std::sqrt(num / den);
}

struct Outputs {
  std::vector<double> o, lse, dq, dk, dv, dbias[2];
};

struct Problem {
  Case c;
  ta::AttentionParams hp, dp;  // host / device params
  int64_t rows_q = 0, rows_k = 0;
  HostT q, k, v, dout, bias[2];
  std::vector<float> slopes, dlse;
  std::vector<int32_t> cuq, cuk;
  int64_t bias_n[2] = {0, 0};
  // device
  DevBuf dq_, dk_, dv_, ddo, dO, dlse_d, dq_out, dk_out, dv_out, dcuq, dcuk, dslopes, dbias[2], dbgrad[2], ws;
  DevBuf dlse_out;
  DevBuf qkv;  // packed variant
};

void fill_normal(HostT& v, size_t n, ta::DType t, float sigma = 1.f) {
  std::normal_distribution<float> nd(0.f, sigma);
  std::vector<float> vals(n);
  for (auto& x : vals) x = nd(rng());
  v = make_host(vals, t);
}

// Sets up sizes, strides and host/device buffers; q/k/v contiguous [rows, H, D]
// (or packed [rows, 3, H, D] views when c.packed_qkv).
void setup(Problem& P) {
  const Case& c = P.c;
  const int Dv = c.Dv < 0 ? c.D : c.Dv;
  ta::AttentionParams p;
  p.dtype = c.dtype;
  const bool varlen = !c.varlen_q.empty();
  p.batch = varlen ? static_cast<int>(c.varlen_q.size()) : c.B;
  if (varlen) {
    P.cuq.push_back(0); P.cuk.push_back(0);
    int mq = 0, mk = 0;
    for (size_t b = 0; b < c.varlen_q.size(); ++b) {
      P.cuq.push_back(P.cuq.back() + c.varlen_q[b]);
      P.cuk.push_back(P.cuk.back() + c.varlen_k[b]);
      mq = std::max(mq, c.varlen_q[b]); mk = std::max(mk, c.varlen_k[b]);
    }
    p.seqlen_q = mq; p.seqlen_k = mk;
    p.total_q = P.cuq.back(); p.total_k = P.cuk.back();
    P.rows_q = p.total_q; P.rows_k = p.total_k;
  } else {
    p.seqlen_q = c.Nq; p.seqlen_k = c.Nk;
    P.rows_q = int64_t(c.B) * c.Nq; P.rows_k = int64_t(c.B) * c.Nk;
  }
  p.heads_q = c.Hq; p.heads_kv = c.Hkv; p.head_dim = c.D; p.head_dim_v = Dv;
  p.scale = c.scale != 0.f ? c.scale : 1.f / std::sqrt(static_cast<float>(c.D));
  p.causal = c.causal; p.window_left = c.wl; p.window_right = c.wr;
  // contiguous strides
  auto set3 = [&](int64_t& bs, int64_t& rs, int64_t& hs, int N, int H, int d) {
    hs = d; rs = int64_t(H) * d; bs = int64_t(N) * H * d;
  };
  set3(p.q_batch_stride, p.q_row_stride, p.q_head_stride, p.seqlen_q, c.Hq, c.D);
  set3(p.k_batch_stride, p.k_row_stride, p.k_head_stride, p.seqlen_k, c.Hkv, c.D);
  set3(p.v_batch_stride, p.v_row_stride, p.v_head_stride, p.seqlen_k, c.Hkv, Dv);
  set3(p.o_batch_stride, p.o_row_stride, p.o_head_stride, p.seqlen_q, c.Hq, Dv);
  set3(p.do_batch_stride, p.do_row_stride, p.do_head_stride, p.seqlen_q, c.Hq, Dv);
  set3(p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride, p.seqlen_q, c.Hq, c.D);
  set3(p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride, p.seqlen_k, c.Hkv, c.D);
  set3(p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride, p.seqlen_k, c.Hkv, Dv);

  fill_normal(P.q, P.rows_q * c.Hq * c.D, c.dtype);
  if (c.k_ramp == 0.f) {
    fill_normal(P.k, P.rows_k * c.Hkv * c.D, c.dtype);
  } else {
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> vals(P.rows_k * c.Hkv * c.D);
    const size_t per_row = static_cast<size_t>(c.Hkv) * c.D;
    for (size_t i = 0; i < vals.size(); ++i) {
      const int64_t j = static_cast<int64_t>(i / per_row) % p.seqlen_k;
      vals[i] = nd(rng()) * (1.f + c.k_ramp * static_cast<float>(j) / static_cast<float>(p.seqlen_k));
    }
    P.k = make_host(vals, c.dtype);
  }
  fill_normal(P.v, P.rows_k * c.Hkv * Dv, c.dtype);
  fill_normal(P.dout, P.rows_q * c.Hq * Dv, c.dtype);

  ta::AttentionParams hp = p, dp = p;
  hp.device = ta::Device::cpu; dp.device = ta::Device::cuda;
  hp.q = P.q.data(); hp.k = P.k.data(); hp.v = P.v.data(); hp.dout = P.dout.data();
  if (c.packed_qkv) {
    // [rows, 3, H, D] with Hq == Hkv, D == Dv: q at slot 0, k at 1, v at 2
    const int H = c.Hq, D = c.D;
    const int N = p.seqlen_q;
    const size_t row = size_t(H) * D * P.q.esize();  // bytes of one token's heads
    std::vector<uint8_t> packed(P.rows_q * 3 * row);
    for (int64_t r = 0; r < P.rows_q; ++r)
      for (int slot = 0; slot < 3; ++slot)
        std::memcpy(&packed[(r * 3 + slot) * row], &(slot == 0 ? P.q : slot == 1 ? P.k : P.v).bytes[r * row], row);
    P.qkv = upload(packed);
    auto* base = static_cast<uint8_t*>(P.qkv.p);
    dp.q = base; dp.k = base + row; dp.v = base + 2 * row;
    for (auto* s : {&dp.q_batch_stride, &dp.k_batch_stride, &dp.v_batch_stride}) *s = int64_t(N) * 3 * H * D;
    for (auto* s : {&dp.q_row_stride, &dp.k_row_stride, &dp.v_row_stride}) *s = 3 * H * D;
  } else {
    P.dq_ = upload(P.q.bytes); P.dk_ = upload(P.k.bytes); P.dv_ = upload(P.v.bytes);
    dp.q = P.dq_.p; dp.k = P.dk_.p; dp.v = P.dv_.p;
  }
  P.ddo = upload(P.dout.bytes); dp.dout = P.ddo.p;
  if (varlen) {
    hp.cu_seqlens_q = P.cuq.data(); hp.cu_seqlens_k = P.cuk.data();
    P.dcuq = upload(P.cuq); P.dcuk = upload(P.cuk);
    dp.cu_seqlens_q = static_cast<int32_t*>(P.dcuq.p); dp.cu_seqlens_k = static_cast<int32_t*>(P.dcuk.p);
  }
  // bias terms
  int nb = 0;
  for (int t = 0; t < 2; ++t) {
    const BiasSpec& s = c.bias[t];
    if (!s.on) continue;
    ta::BiasTerm bt;
    bt.dtype = s.dtype;
    bt.batch_mod = s.batch_mod; bt.head_mod = s.head_mod;
    const int Nq = p.seqlen_q, Nk = p.seqlen_k;
    bt.row_stride = s.bcast_rows ? 0 : Nk;
    const int64_t slice = s.bcast_rows ? Nk : int64_t(Nq) * Nk;
    bt.head_stride = s.bcast_head ? 0 : slice;
    const int nh = s.bcast_head ? 1 : s.head_mod;
    bt.batch_stride = s.bcast_batch ? 0 : slice * nh;
    const int nbm = s.bcast_batch ? 1 : s.batch_mod;
    const int64_t n = slice * nh * nbm;
    P.bias_n[nb] = ta::bias_extent(bt, Nq, Nk);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::uniform_real_distribution<float> ud(0.f, 1.f);
    std::vector<float> vals(n);
    for (auto& x : vals) x = ud(rng()) < s.neg_inf_frac ? -std::numeric_limits<float>::infinity() : nd(rng());
    if (s.zero_slices) {
      for (int64_t e = 0; e < n; ++e) {
        const int64_t sl = e / slice, in = e % slice;
        if (sl % 4 == 0 || sl % 4 == 2) vals[e] = sl % 4 == 0 ? 0.f : -0.f;
        else if (sl % 4 == 1) vals[e] = in == slice - 1 ? -2.5f : 0.f;
      }
    }
    P.bias[nb] = make_host(vals, s.dtype);
    bt.ptr = P.bias[nb].data();
    P.dbias[nb] = upload(P.bias[nb].bytes);
    hp.bias[nb] = bt;
    dp.bias[nb] = bt;
    dp.bias[nb].ptr = P.dbias[nb].p;
    if (s.grad) {
      P.dbgrad[nb] = DevBuf(P.bias_n[nb] * sizeof(float));
      dp.bias[nb].grad = static_cast<float*>(P.dbgrad[nb].p);
      hp.bias[nb].grad = reinterpret_cast<float*>(1);  // reference only checks non-null
    }
    ++nb;
  }
  hp.num_bias = dp.num_bias = nb;
  if (c.alibi) {
    std::uniform_real_distribution<float> ud(0.05f, 0.5f);
    P.slopes.resize(p.batch * c.Hq);
    for (auto& x : P.slopes) x = ud(rng());
    P.dslopes = upload(P.slopes);
    hp.alibi_slopes = P.slopes.data(); dp.alibi_slopes = static_cast<float*>(P.dslopes.p);
    hp.alibi_batch_stride = dp.alibi_batch_stride = c.Hq;
  }
  if (c.dropout > 0) {
    hp.dropout_p = dp.dropout_p = c.dropout;
    hp.dropout_seed = dp.dropout_seed = rng()();
    hp.dropout_offset = dp.dropout_offset = rng()() & 0xFFFFFFFFFFull;
  }
  const int64_t nl = ta::lse_numel(p);
  if (c.dlse) {
    std::normal_distribution<float> nd(0.f, 1.f);
    P.dlse.resize(nl);
    for (auto& x : P.dlse) x = nd(rng());
    P.dlse_d = upload(P.dlse);
    hp.dlse = P.dlse.data(); dp.dlse = static_cast<float*>(P.dlse_d.p);
  }
  hp.deterministic = dp.deterministic = c.deterministic;
  // outputs, poisoned with NaN (0xFF bytes: NaN for fp32, fp16 and bf16)
  const int64_t es = ta::dtype_size(c.dtype);
  P.dO = DevBuf(P.rows_q * c.Hq * Dv * es + 16);
  P.dlse_out = DevBuf(nl * 4 + 16);
  P.dq_out = DevBuf(P.rows_q * c.Hq * c.D * es + 16);
  P.dk_out = DevBuf(P.rows_k * c.Hkv * c.D * es + 16);
  P.dv_out = DevBuf(P.rows_k * c.Hkv * Dv * es + 16);
  dp.o = P.dO.p; dp.lse = static_cast<float*>(P.dlse_out.p);
  dp.dq = P.dq_out.p; dp.dk = P.dk_out.p; dp.dv = P.dv_out.p;
  P.hp = hp; P.dp = dp;
}

void poison(DevBuf& b) { if (b.p) cudaMemset(b.p, 0xFF, b.n); }

// n elements of dtype t from the device, as doubles.
std::vector<double> download_as_double(const DevBuf& d, size_t n, ta::DType t) {
  const std::vector<uint8_t> raw = download<uint8_t>(d, n * ta::dtype_size(t));
  std::vector<double> r(n);
  for (size_t i = 0; i < n; ++i) r[i] = ta::load_as_float(raw.data(), static_cast<int64_t>(i), t);
  return r;
}

// packed: with a forward workspace (bias terms read from fragment-ordered copies);
// otherwise without (bias terms read in place).
void run_forward(Problem& P, Outputs& out, bool packed = true) {
  poison(P.dO); poison(P.dlse_out);
  const size_t wsb = packed ? ta::cuda::forward_workspace_bytes(P.dp) : 0;
  if (P.ws.n < wsb) P.ws = DevBuf(wsb);
  poison(P.ws);
  P.dp.workspace = wsb ? P.ws.p : nullptr;
  ta::cuda::forward(P.dp, g_ov);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const Case& c = P.c;
  const int Dv = c.Dv < 0 ? c.D : c.Dv;
  out.o = download_as_double(P.dO, P.rows_q * c.Hq * Dv, c.dtype);
  const auto l = download<float>(P.dlse_out, ta::lse_numel(P.dp));
  out.lse.assign(l.begin(), l.end());
}

void run_backward(Problem& P, Outputs& out) {
  const Case& c = P.c;
  const int Dv = c.Dv < 0 ? c.D : c.Dv;
  poison(P.dq_out); poison(P.dk_out); poison(P.dv_out);
  for (auto& g : P.dbgrad) poison(g);
  const size_t wsb = ta::cuda::backward_workspace_bytes(P.dp, g_ov);
  if (P.ws.n < wsb) P.ws = DevBuf(wsb);
  poison(P.ws);
  P.dp.workspace = P.ws.p;
  if (ta::cuda::choose(P.dp, ta::cuda::Pass::backward, g_ov).kernel == ta::cuda::Kernel::portable_win) ++g_win_runs;
  ta::cuda::backward(P.dp, g_ov);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  out.dq = download_as_double(P.dq_out, P.rows_q * c.Hq * c.D, c.dtype);
  out.dk = download_as_double(P.dk_out, P.rows_k * c.Hkv * c.D, c.dtype);
  out.dv = download_as_double(P.dv_out, P.rows_k * c.Hkv * Dv, c.dtype);
  for (int t = 0; t < P.dp.num_bias; ++t)
    if (P.dp.bias[t].grad) {
      const auto g = download<float>(P.dbgrad[t], P.bias_n[t]);
      out.dbias[t].assign(g.begin(), g.end());
    }
}

void expect_close(const char* what, const Case& c, const std::vector<double>& x, const std::vector<double>& ref,
                  double tol) {
  ASSERT_EQ(x.size(), ref.size()) << what;
  int nans = 0;
  const double e = rel_err(x, ref, &nans);
  EXPECT_EQ(nans, 0) << c.name << ": " << what << " has non-finite values";
  EXPECT_LT(e, tol) << c.name << ": " << what << " rel err " << e;
  if (::testing::Test::HasFailure()) return;
  std::printf("  %-40s %-6s rel err %.2e\n", c.name.c_str(), what, e);
}

void check_lse(const Case& c, const std::vector<double>& x, const std::vector<double>& ref, double tol) {
  ASSERT_EQ(x.size(), ref.size());
  double num = 0, den = 0;
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isinf(ref[i])) { if (!(std::isinf(x[i]) && x[i] < 0)) ++bad; continue; }
    if (!std::isfinite(x[i])) { ++bad; continue; }
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i] + 1.0;
  }
  EXPECT_EQ(bad, 0) << c.name << ": lse -inf / non-finite mismatch";
  EXPECT_LT(std::sqrt(num / std::max(den, 1.0)), tol) << c.name << ": lse";
}

void run_case(const Case& c) {
  Problem P;
  P.c = c;
  setup(P);
  Outputs g;
  run_forward(P, g);
  if (::testing::Test::HasFatalFailure()) return;
  // float64 reference on the same (rounded) inputs; it recomputes O itself for D = rowsum(dO * O)
  const ta::reference::Result ref =
      c.backward ? ta::reference::forward_backward(P.hp) : ta::reference::forward(P.hp);
  // float32 runs the exact SIMT kernels: 1e-4 for every output and gradient
  const double tol = c.dtype == ta::DType::bf16 ? 1e-2 : c.dtype == ta::DType::f16 ? 5e-3 : 1e-4;
  expect_close("O", c, g.o, ref.o, tol);
  check_lse(c, g.lse, ref.lse, c.dtype == ta::DType::f32 ? 1e-5 : 5e-3);
  if (ta::cuda::forward_workspace_bytes(P.dp) > 0) {  // the same without the packed bias copies
    Outputs u;
    run_forward(P, u, false);
    if (::testing::Test::HasFatalFailure()) return;
    expect_close("O(direct bias)", c, u.o, ref.o, tol);
    check_lse(c, u.lse, ref.lse, 5e-3);
    EXPECT_LE(ta::cuda::forward_workspace_bytes(P.dp), ta::cuda::backward_workspace_bytes(P.dp)) << c.name;
  }
  if (!c.backward) return;
  run_backward(P, g);
  if (::testing::Test::HasFatalFailure()) return;
  expect_close("dQ", c, g.dq, ref.dq, tol);
  expect_close("dK", c, g.dk, ref.dk, tol);
  expect_close("dV", c, g.dv, ref.dv, tol);
  for (int t = 0; t < P.hp.num_bias; ++t)
    if (P.dp.bias[t].grad) expect_close(t == 0 ? "dBias0" : "dBias1", c, g.dbias[t], ref.dbias[t], tol);
  if (c.deterministic) {
    Outputs g2;
    run_backward(P, g2);
    EXPECT_TRUE(std::memcmp(g.dq.data(), g2.dq.data(), g.dq.size() * 8) == 0) << c.name << ": dQ not repeatable";
    EXPECT_TRUE(std::memcmp(g.dk.data(), g2.dk.data(), g.dk.size() * 8) == 0) << c.name << ": dK not repeatable";
    EXPECT_TRUE(std::memcmp(g.dv.data(), g2.dv.data(), g.dv.size() * 8) == 0) << c.name << ": dV not repeatable";
    for (int t = 0; t < P.hp.num_bias; ++t)
      if (!g.dbias[t].empty())
        EXPECT_TRUE(std::memcmp(g.dbias[t].data(), g2.dbias[t].data(), g.dbias[t].size() * 8) == 0)
            << c.name << ": dBias not repeatable";
  }
}

Case mk(const std::string& name, ta::DType t, int B, int Nq, int Nk, int H, int D) {
  Case c;
  c.name = name; c.dtype = t; c.B = B; c.Nq = Nq; c.Nk = Nk; c.Hq = H; c.Hkv = H; c.D = D;
  return c;
}

const ta::DType kTypes[] = {ta::DType::bf16, ta::DType::f16, ta::DType::f32};
std::string tn(ta::DType t) { return t == ta::DType::bf16 ? "bf16" : t == ta::DType::f16 ? "f16" : "f32"; }
// Cases written for one half type also run in float32.
ta::DType or_f32(ta::DType t, bool f32) { return f32 ? ta::DType::f32 : t; }

}  // namespace

TEST(AttentionCuda, HeadDimsAndRaggedSizes) {
  REQUIRE_GPU();
  struct S { int D, Nq, Nk; };
  const S sizes[] = {{8, 63, 65}, {16, 343, 343}, {32, 300, 7}, {64, 1, 300}, {80, 65, 63},
                     {128, 1000, 1000}, {256, 65, 300}, {64, 7, 1}, {12, 63, 65}, {40, 100, 100}};
  for (auto t : kTypes)
    for (const S& s : sizes) {
      Case c = mk("dims_" + tn(t) + "_d" + std::to_string(s.D) + "_" + std::to_string(s.Nq) + "x" + std::to_string(s.Nk),
                  t, 2, s.Nq, s.Nk, 2, s.D);
      if (s.D >= 128 && s.Nq >= 1000) c.B = 1;
      run_case(c);
    }
}

TEST(AttentionCuda, HeadDimVDiffers) {
  REQUIRE_GPU();
  for (auto t : {ta::DType::bf16, ta::DType::f32}) {
    Case c = mk("dv_differs_" + tn(t), t, 2, 65, 70, 2, 32);
    c.Dv = 64;
    run_case(c);
  }
  Case d = mk("dv_smaller_f32", ta::DType::f32, 2, 70, 65, 2, 80);
  d.Dv = 24;
  run_case(d);
}

TEST(AttentionCuda, CausalAndWindows) {
  REQUIRE_GPU();
  struct S { int Nq, Nk; bool causal; int wl, wr; };
  const S ss[] = {{300, 300, true, -1, -1}, {65, 300, true, -1, -1}, {300, 65, true, -1, -1},
                  {343, 343, false, 32, 16}, {300, 1000, false, 100, -1}, {1000, 300, true, 64, -1},
                  {63, 65, false, -1, 0}, {200, 200, false, 0, 0}};
  for (auto t : kTypes)
    for (const S& s : ss)
      for (int D : {32, 64, 128}) {
        Case c = mk("mask_" + tn(t) + "_d" + std::to_string(D) + "_" + std::to_string(s.Nq) + "x" + std::to_string(s.Nk) +
                        (s.causal ? "_causal" : "") + "_w" + std::to_string(s.wl) + "," + std::to_string(s.wr),
                    t, 2, s.Nq, s.Nk, 2, D);
        c.causal = s.causal; c.wl = s.wl; c.wr = s.wr;
        run_case(c);
      }
}

TEST(AttentionCuda, SwinBiasWithGrad) {
  REQUIRE_GPU();
  for (auto t : kTypes)
    for (ta::DType bdt : {ta::DType::f32, ta::DType::bf16})
      for (bool det : {false, true})
        for (int D : {16, 32}) {
          // 8 windows of 2 images (nW = 4), 3 heads, 49 tokens: rel-pos bias [H, N, N] + a shift mask
          // [nW, N, N] that is zero in some windows (with its gradient, which those windows still get)
          Case c = mk("swin_" + tn(t) + "_bias" + (bdt == ta::DType::f32 ? "f32" : "bf16") + (det ? "_det" : "") +
                          "_d" + std::to_string(D),
                      t, 8, 49, 49, 3, D);
          c.bias[0].on = true; c.bias[0].dtype = bdt; c.bias[0].bcast_batch = true; c.bias[0].head_mod = 3;
          c.bias[1].on = true; c.bias[1].dtype = bdt; c.bias[1].batch_mod = 4; c.bias[1].bcast_head = true;
          c.bias[1].neg_inf_frac = 0.1f; c.bias[1].zero_slices = true;
          c.deterministic = det;
          run_case(c);
        }
}

TEST(AttentionCuda, BiasBroadcastVariants) {
  REQUIRE_GPU();
  for (bool f32 : {false, true})
  for (bool det : {false, true}) {
    const std::string sfx = std::string(det ? "_det" : "") + (f32 ? "_f32" : "");
    // full [B, H, Nq, Nk] bias and a key-padding bias [B, 1, 1, Nk] (row broadcast)
    Case c = mk("bias_full_and_rows" + sfx, or_f32(ta::DType::bf16, f32), 2, 65, 130, 2, 64);
    c.bias[0].on = true; c.bias[0].batch_mod = 2; c.bias[0].head_mod = 2;
    c.bias[1].on = true; c.bias[1].batch_mod = 2; c.bias[1].bcast_head = true; c.bias[1].bcast_rows = true;
    c.causal = true;
    c.deterministic = det;
    run_case(c);
    // batch_mod tiling with head broadcast through head_mod = 1 and no grad on the second term
    Case d = mk("bias_mod_nograd" + sfx, or_f32(ta::DType::f16, f32), 4, 63, 63, 4, 32);
    d.bias[0].on = true; d.bias[0].batch_mod = 2; d.bias[0].head_mod = 1;
    d.bias[1].on = true; d.bias[1].batch_mod = 4; d.bias[1].head_mod = 4; d.bias[1].grad = false;
    d.deterministic = det;
    run_case(d);
  }
}

// Bias terms are read from fragment-ordered copies (bias_pack.cu) by the fp16 / bf16 kernels:
// every head-dim bucket's tile shape, ragged Nq != Nk, fp16 terms under bf16 data, GQA, a
// full (unique) term whose packed dBias must stay bitwise repeatable in deterministic mode.
// With an fp32 second term the kernels take the kModsAll path (packed reads from global
// memory); with two 16-bit terms the kModsBias one (tiles staged in shared memory).
TEST(AttentionCuda, PackedBiasTileEdges) {
  REQUIRE_GPU();
  for (int D : {8, 64, 128, 256})
    for (bool staged : {false, true})
      for (bool det : {false, true}) {
        Case c = mk("packed_bias_d" + std::to_string(D) + (staged ? "_staged" : "") + (det ? "_det" : ""),
                    D == 64 ? ta::DType::f16 : ta::DType::bf16, 2, 37, 150, 4, D);
        c.Hkv = 2;
        c.bias[0].on = true; c.bias[0].dtype = ta::DType::f16; c.bias[0].batch_mod = 2; c.bias[0].head_mod = 4;
        c.bias[1].on = true; c.bias[1].bcast_batch = true; c.bias[1].head_mod = 2;
        c.bias[1].dtype = staged ? ta::DType::bf16 : ta::DType::f32;
        c.bias[1].neg_inf_frac = 0.05f;
        c.wl = 90; c.wr = 20;
        c.deterministic = det;
        run_case(c);
      }
}

// The d16 / d32 backward's LEAN variant (launch_impl.cuh, bwd_lean_ok: dense, non-causal, no
// window, aligned rows, head dims exactly 16 / 32, fp16 / bf16, non-deterministic), which reads
// lse / D from the row statistics, masks keys past the end with -inf and query columns past it
// with +inf lse, and counts its way through heads and query blocks: Swin-like windows with two
// staged 16-bit terms, ragged Nq != Nk either way round a 64-row block, GQA with per-head bias
// slices (G = 3) and without bias (G = 4), rows a -inf bias empties, dLSE.
TEST(AttentionCuda, LeanWindowBackward) {
  REQUIRE_GPU();
  for (ta::DType t : {ta::DType::bf16, ta::DType::f16})
    for (int D : {16, 32})
      for (int mode = 0; mode < 4; ++mode) {
        const std::string name = "lean_" + tn(t) + "_d" + std::to_string(D) + "_m" + std::to_string(mode);
        if (mode == 0) {  // 8 windows of 2 images (nW = 4), 3 heads, 343 tokens; the mask zero in 3 windows
          Case c = mk(name, t, 8, 343, 343, 3, D);
          c.bias[0].on = true; c.bias[0].dtype = t; c.bias[0].bcast_batch = true; c.bias[0].head_mod = 3;
          c.bias[1].on = true; c.bias[1].dtype = t; c.bias[1].batch_mod = 4; c.bias[1].bcast_head = true;
          c.bias[1].neg_inf_frac = 0.1f; c.bias[1].grad = false; c.bias[1].zero_slices = true;
          run_case(c);
        } else if (mode == 1) {
          Case c = mk(name, t, 2, 70, 200, 6, D);
          c.Hkv = 2;
          c.bias[0].on = true; c.bias[0].dtype = ta::DType::f16; c.bias[0].batch_mod = 2; c.bias[0].head_mod = 6;
          c.dlse = true;
          run_case(c);
        } else if (mode == 2) {
          Case c = mk(name, t, 2, 200, 70, 4, D);
          c.Hkv = 1; c.dlse = true;
          run_case(c);
        } else {
          Case c = mk(name, t, 1, 65, 129, 2, D);
          c.bias[0].on = true; c.bias[0].dtype = ta::DType::bf16; c.bias[0].head_mod = 2; c.bias[0].neg_inf_frac = 0.97f;
          run_case(c);
        }
      }
}

// The d16 / d32 backward's WIN variant (one CTA per sequence and head, dQ in shared memory, lse / D
// computed in the kernel): a query run against one to eight key blocks, ragged tails, dlse, dBias of one
// or both terms; 7 windows of 343 start their walks at different key and query blocks (WIN rotation).
// Each case must have taken WIN (g_win_runs), and one row past win_max_rows (448 at d16, 416 at
// d32) must not.
TEST(AttentionCuda, WindowPerCtaBackward) {
  REQUIRE_GPU();
  struct W { int B, Nq, Nk, H; bool dlse, grad1, win; };
  for (int D : {16, 32}) {
    const int max_rows = D == 16 ? 448 : 416;
    const W ws[] = {{7, 343, 343, 3, false, false, true}, {2, 70, 300, 2, true, true, true},
                    {1, 1, 1000, 2, true, false, true},   {2, max_rows, 129, 1, false, true, true},
                    {1, max_rows + 1, 65, 1, false, false, false}, {4, 64, 64, 2, true, false, true}};
    for (ta::DType t : {ta::DType::bf16, ta::DType::f16})
      for (const W& w : ws) {
        Case c = mk("win_d" + std::to_string(D) + "_" + tn(t) + "_" + std::to_string(w.Nq) + "x" + std::to_string(w.Nk),
                    t, w.B, w.Nq, w.Nk, w.H, D);
        c.bias[0].on = true; c.bias[0].dtype = t; c.bias[0].bcast_batch = true; c.bias[0].head_mod = w.H;
        c.bias[1].on = true; c.bias[1].dtype = ta::DType::bf16; c.bias[1].batch_mod = w.B; c.bias[1].bcast_head = true;
        c.bias[1].neg_inf_frac = 0.1f; c.bias[1].grad = w.grad1; c.bias[1].zero_slices = true;
        c.dlse = w.dlse;
        const uint64_t before = g_win_runs;
        run_case(c);
        EXPECT_EQ(g_win_runs - before, w.win ? 1u : 0u) << c.name;
      }
  }
}

// Host only (no GPU): a backward that will take WIN asks for no fp32 dQ accumulator or row statistics
// in its workspace (backward_workspace_bytes / plan_args), the same call made causal (no WIN) does.
// Placeholder device pointers: sizing reads only shapes, strides, dtypes and alignment.
TEST(AttentionCudaHost, WinBackwardWorkspace) {
  for (int D : {16, 32}) {
    const int B = 8, N = 343, H = 3;
    auto fake = [](uintptr_t k) { return reinterpret_cast<void*>(k << 20); };
    ta::AttentionParams p;
    p.device = ta::Device::cuda;
    p.dtype = ta::DType::bf16;
    p.batch = B; p.seqlen_q = p.seqlen_k = N; p.heads_q = p.heads_kv = H; p.head_dim = p.head_dim_v = D;
    p.q = fake(1); p.k = fake(2); p.v = fake(3); p.o = fake(4); p.dout = fake(5);
    p.dq = fake(6); p.dk = fake(7); p.dv = fake(8);
    p.lse = static_cast<float*>(fake(9));
    const int64_t rs = int64_t(H) * D, bs = N * rs;
    for (int64_t* st : {&p.q_batch_stride, &p.k_batch_stride, &p.v_batch_stride, &p.o_batch_stride, &p.do_batch_stride,
                        &p.dq_batch_stride, &p.dk_batch_stride, &p.dv_batch_stride})
      *st = bs;
    for (int64_t* st : {&p.q_row_stride, &p.k_row_stride, &p.v_row_stride, &p.o_row_stride, &p.do_row_stride,
                        &p.dq_row_stride, &p.dk_row_stride, &p.dv_row_stride})
      *st = rs;
    for (int64_t* st : {&p.q_head_stride, &p.k_head_stride, &p.v_head_stride, &p.o_head_stride, &p.do_head_stride,
                        &p.dq_head_stride, &p.dk_head_stride, &p.dv_head_stride})
      *st = D;
    p.scale = 0.25f;
    p.num_bias = 2;
    p.bias[0].ptr = fake(10); p.bias[0].dtype = ta::DType::bf16;  // relative bias [H, N, N], with dBias
    p.bias[0].head_stride = int64_t(N) * N; p.bias[0].row_stride = N; p.bias[0].head_mod = H;
    p.bias[0].grad = static_cast<float*>(fake(11));
    p.bias[1].ptr = fake(12); p.bias[1].dtype = ta::DType::bf16;  // shift mask [B, N, N], constant
    p.bias[1].batch_stride = int64_t(N) * N; p.bias[1].row_stride = N; p.bias[1].batch_mod = B;
    const size_t win = ta::cuda::backward_workspace_bytes(p);
    p.causal = true;
    const size_t general = ta::cuda::backward_workspace_bytes(p);
    const size_t dq = size_t(B) * N * H * D * sizeof(float);
    EXPECT_GE(general, win + dq) << "d" << D << ": WIN " << win << " bytes, general " << general;
    EXPECT_GT(win, 0u);
  }
}

// The d16 / d32 kModsBias kernels add finite bias terms of the data's type on the tensor cores
// (mma_add_tile16: the packed tile times an identity) and keep the scores in natural units: the
// Swin shapes with two finite terms and both gradients (WIN backward), the general
// kernels (causal), a negative scale, dLSE; then the same with one term of the other 16-bit type
// and with one -inf, which take the adds on the CUDA cores instead (bias_mma_ok).
TEST(AttentionCuda, BiasOnTensorCores) {
  REQUIRE_GPU();
  for (ta::DType t : {ta::DType::bf16, ta::DType::f16})
    for (int D : {16, 32})
      for (int mode = 0; mode < 5; ++mode) {
        const std::string name = "bias_mma_" + tn(t) + "_d" + std::to_string(D) + "_m" + std::to_string(mode);
        Case c = mode == 1 ? mk(name, t, 2, 100, 130, 2, D)
                 : mode == 2 ? mk(name, t, 2, 77, 77, 3, D) : mk(name, t, 4, 343, 343, 3, D);
        c.bias[0].on = true; c.bias[0].dtype = t; c.bias[0].bcast_batch = true; c.bias[0].head_mod = c.Hq;
        c.bias[1].on = true; c.bias[1].dtype = t; c.bias[1].batch_mod = c.B; c.bias[1].bcast_head = true;
        if (mode == 1) c.causal = true;
        if (mode == 2) { c.scale = -0.3f; c.dlse = true; }
        if (mode == 3) c.bias[1].dtype = t == ta::DType::bf16 ? ta::DType::f16 : ta::DType::bf16;
        if (mode == 4) c.bias[1].neg_inf_frac = 0.01f;
        run_case(c);
      }
}

TEST(AttentionCuda, AlibiGqaMqa) {
  REQUIRE_GPU();
  for (auto t : kTypes) {
    Case c = mk("alibi_gqa_" + tn(t), t, 2, 300, 300, 8, 64);
    c.Hkv = 2; c.alibi = true; c.causal = true;
    run_case(c);
    Case m = mk("mqa_" + tn(t), t, 1, 343, 400, 4, 128);
    m.Hkv = 1;
    run_case(m);
  }
}

TEST(AttentionCuda, Varlen) {
  REQUIRE_GPU();
  for (auto t : kTypes)
    for (bool causal : {false, true}) {
      Case c = mk("varlen_" + tn(t) + (causal ? "_causal" : ""), t, 0, 0, 0, 4, 64);
      c.Hkv = 2;
      c.varlen_q = {1, 65, 300, 7};
      c.varlen_k = {7, 65, 343, 0};
      c.causal = causal;
      c.bias[0].on = true; c.bias[0].bcast_batch = true; c.bias[0].head_mod = 4;
      run_case(c);
    }
}

TEST(AttentionCuda, VarlenNoBias) {
  REQUIRE_GPU();
  for (auto t : kTypes)
    for (int D : {64, 128})
      for (bool causal : {false, true}) {
        Case c = mk("varlen_nobias_" + tn(t) + "_d" + std::to_string(D) + (causal ? "_causal" : ""), t, 0, 0, 0, 4, D);
        c.Hkv = 2;
        c.varlen_q = {1, 130, 300, 7, 257};
        c.varlen_k = {7, 65, 343, 0, 256};
        c.causal = causal;
        run_case(c);
      }
}

// Whether the Hopper kernels apply: an sm_90a build on a compute 9.0 device.
static bool hopper_path(int& major, int& minor) {
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
#if defined(TESSERA_SM90A)
  return major == 9 && minor == 0;
#else
  return false;
#endif
}

// Many key blocks and query blocks per CTA, GQA groups and ragged tails on the
// head dims the Hopper kernels take (forward and backward).
TEST(AttentionCuda, GqaLongRagged) {
  REQUIRE_GPU();
  for (ta::DType t : {ta::DType::bf16, ta::DType::f16})
    for (int D : {64, 128})
      for (int mode = 0; mode < 3; ++mode) {
        Case c = mk("gqa_long_" + tn(t) + "_d" + std::to_string(D) + "_m" + std::to_string(mode), t, 2, 777, 641, 8, D);
        c.Hkv = 2;
        c.causal = mode == 1;
        if (mode == 2) { c.wl = 200; c.wr = 50; }
        run_case(c);
      }
  // Longer rows: the d64 forward's consumer refills its 2-stage ring many times (tile_configs.cuh).
  for (ta::DType t : {ta::DType::bf16, ta::DType::f16})
    for (int mode = 0; mode < 3; ++mode) {
      Case c = mk("gqa_long_rows_" + tn(t) + "_d64_m" + std::to_string(mode), t, 1, 1100, 1093, 4, 64);
      c.Hkv = 2;
      c.causal = mode == 1;
      if (mode == 2) { c.wl = 300; c.wr = 40; }
      run_case(c);
    }
}

// Tiles whose last 128-key block only their first 64 keys are seen in (fwd_sm90_kernel.cuh: that block is
// computed as 64 keys): causal d64 rows past 2048 keys (the 128-key kernel; every other tile of 64 rows
// ends at an odd multiple of 64 keys), ragged ends of <= 64 keys at d64 and d128 (persistent and not), GQA.
TEST(AttentionCuda, HalfLastKeyBlocks) {
  REQUIRE_GPU();
  struct S { int Nq, Nk, D, Hq, Hkv; bool causal; };
  const S ss[] = {{2200, 2200, 64, 2, 1, true}, {300, 2100, 64, 2, 2, false}, {500, 1060, 128, 2, 2, false},
                  {200, 4150, 128, 2, 1, false}, {2100, 2100, 64, 2, 2, false}};
  for (ta::DType t : {ta::DType::bf16, ta::DType::f16})
    for (const S& s : ss) {
      Case c = mk("half_last_" + tn(t) + "_d" + std::to_string(s.D) + "_" + std::to_string(s.Nq) + "x" +
                      std::to_string(s.Nk) + (s.causal ? "_causal" : ""),
                  t, 1, s.Nq, s.Nk, s.Hq, s.D);
      c.Hkv = s.Hkv;
      c.causal = s.causal;
      run_case(c);
    }
}

// The d128 Hopper forward rescales O only when a row's max grows by more than 8 in log2 units (lazy
// rescaling, fwd_sm90_kernel.cuh), so P runs up to 256 against a stale max: keys whose values grow along the row make
// every row's max climb block after block, by less and by more than the slack (sharper softmax: larger
// scales), at d64 and d128 (persistent and not), causal and not, bf16 and fp16; LSE and the backward, which
// reads it, checked too.
TEST(AttentionCuda, LazyRescaleClimbingMaxima) {
  REQUIRE_GPU();
  struct S { int N, D; bool causal; float ramp, scale; };
  const S ss[] = {{1100, 128, false, 3.f, 0.25f}, {2100, 128, true, 4.f, 0.5f}, {4200, 128, false, 2.f, 0.2f},
                  {1500, 64, false, 3.f, 0.4f}, {1300, 64, true, 6.f, 1.0f}};
  for (ta::DType t : {ta::DType::bf16, ta::DType::f16})
    for (const S& s : ss) {
      Case c = mk("lazy_rescale_" + tn(t) + "_d" + std::to_string(s.D) + "_N" + std::to_string(s.N) +
                      (s.causal ? "_causal" : ""), t, 1, s.N, s.N, 2, s.D);
      c.causal = s.causal;
      c.k_ramp = s.ramp;
      c.scale = s.scale;
      c.backward = s.N <= 1500;
      run_case(c);
    }
}

// d64 rows of 129..208 keys take the Hopper forward's one-block configuration
// (208-key blocks, tile_configs.cuh): ViT's 197 tokens and the edges of the range,
// more and fewer queries than keys, causal, windows, GQA and varlen; 209 keys
// goes back to the ring.
TEST(AttentionCuda, ShortRowsOneKeyBlock) {
  REQUIRE_GPU();
  struct S { int Nq, Nk; };
  const S sizes[] = {{197, 197}, {201, 201}, {1, 129}, {300, 208}, {64, 150}, {130, 209}};
  for (ta::DType t : {ta::DType::bf16, ta::DType::f16})
    for (const S& s : sizes)
      for (int mode = 0; mode < 3; ++mode) {
        Case c = mk("short_rows_" + tn(t) + "_" + std::to_string(s.Nq) + "x" + std::to_string(s.Nk) + "_m" +
                        std::to_string(mode), t, 3, s.Nq, s.Nk, 4, 64);
        c.Hkv = mode == 0 ? 4 : 1;
        c.causal = mode == 1;
        if (mode == 2) { c.wl = 60; c.wr = 17; }
        run_case(c);
      }
  for (bool causal : {false, true}) {
    Case c = mk(std::string("short_rows_varlen") + (causal ? "_causal" : ""), ta::DType::bf16, 0, 0, 0, 4, 64);
    c.Hkv = 2;
    c.varlen_q = {197, 5, 208, 150};
    c.varlen_k = {197, 140, 0, 208};
    c.causal = causal;
    run_case(c);
  }
}

// The persistent d128 forward (tile_configs.cuh, fixed-length calls without window masks, causal ones with as
// many queries as keys, rows of at most 4096 keys): with more tiles than SMs each CTA walks several, so the K / V ring, the Q load and
// the O staging run on from one tile into the next; ragged query and key counts (partial last tiles, a
// partial last key block, one key), GQA, bf16 and fp16. 2 x 16 heads x 13 query blocks = 416 tiles: three
// or four per CTA on an H200. (fp16 takes only the cheap shape: the float64 reference of the others costs
// ~20 s each.)
TEST(AttentionCuda, PersistentForwardManyTiles) {
  REQUIRE_GPU();
  struct S { int Nq, Nk, Hkv; };
  const S sizes[] = {{1600, 300, 16}, {1601, 1, 4}, {1536, 257, 2}};
  for (ta::DType t : {ta::DType::bf16, ta::DType::f16})
    for (const S& s : sizes) {
      if (t == ta::DType::f16 && s.Nk > 1) continue;
      Case c = mk("persistent_" + tn(t) + "_" + std::to_string(s.Nq) + "x" + std::to_string(s.Nk) + "_hkv" +
                      std::to_string(s.Hkv), t, 2, s.Nq, s.Nk, 16, 128);
      c.Hkv = s.Hkv;
      run_case(c);
    }
  // Causal, as many queries as keys: tiles walked in heavy / light pairs (tile_at). 512 keys x 70 heads:
  // 280 tiles, 140 pairs; 1100 keys (9 query blocks, the last ragged: pairs run across heads) x 32 heads
  // over 8 kv heads: 288 tiles, 144 pairs; more pairs than an H200's 132 SMs either way.
  for (int n : {512, 1100}) {
    Case c = mk("persistent_causal_bf16_" + std::to_string(n), ta::DType::bf16, 1, n, n, n == 512 ? 70 : 32, 128);
    c.Hkv = n == 512 ? 70 : 8;
    c.causal = true;
    run_case(c);
  }
  int major = 0, minor = 0;
  if (hopper_path(major, minor)) {
    Case c = mk("persistent_select", ta::DType::bf16, 2, 1600, 300, 16, 128);
    Problem P;
    P.c = c;
    setup(P);
    EXPECT_STREQ(ta::cuda::forward_kernel(P.dp), "sm90_wgmma_persistent");
    ta::AttentionParams p = P.dp;
    p.causal = true;  // 1600 queries over 300 keys: tiles of unequal work the walk does not pair
    EXPECT_STREQ(ta::cuda::forward_kernel(p), "sm90_wgmma");
    p.seqlen_q = p.seqlen_k;
    EXPECT_STREQ(ta::cuda::forward_kernel(p), "sm90_wgmma_persistent");
  }
}

// The Hopper backward's tile kernels forced in-process (Overrides::sm90_backward):
// 144 tiles for an H200's 132 SMs; dense, causal (tiles of unequal work), windows, GQA, 200 causal
// queries with a 100-key window over 1030 keys (key blocks 0..4 seen by no row: tiles without work
// between tiles with work, dK = dV = 0), and varlen (key blocks past a short sequence, an empty
// sequence). Each tile walks its query blocks from a rotated start, as by default.
static void backward_tiles(const char* kernel, const char* name) {
  int major = 0, minor = 0;
  const bool hopper = hopper_path(major, minor);
  ta::cuda::apply_override(g_ov, std::string("sm90_backward=") + kernel);
  for (int D : {64, 128})
    for (int mode = 0; mode < 4; ++mode) {
      Case c = mk(std::string(kernel) + "_bwd_bf16_d" + std::to_string(D) + "_m" + std::to_string(mode),
                  ta::DType::bf16, 2, mode == 3 ? 200 : 1000, 1030, 16, D);
      c.Hkv = 8;
      c.causal = mode == 1 || mode == 3;
      if (mode == 2) { c.wl = 300; c.wr = 60; }
      if (mode == 3) c.wl = 100;
      run_case(c);
      if (mode == 0 && hopper) {
        Problem P;
        P.c = c;
        setup(P);
        EXPECT_STREQ(ta::cuda::backward_kernel(P.dp, g_ov), name);
      }
    }
  {
    Case c = mk(std::string(kernel) + "_bwd_f16_varlen_d128", ta::DType::f16, 0, 0, 0, 4, 128);
    c.Hkv = 2;
    c.varlen_q = {1, 130, 300, 7, 257};
    c.varlen_k = {7, 65, 343, 0, 256};
    c.causal = true;
    run_case(c);
  }
  g_ov = {};
}

// The pair kernel on the same tiles: by default it now runs only d64 causal rows of 513..1024 keys and the
// deterministic mode, so the other shapes are forced here.
TEST(AttentionCuda, PairBackwardTiles) {
  REQUIRE_GPU();
  backward_tiles("pair", "sm90_wgmma");
}

// The warp-specialised backward (a producer warpgroup loads and reduce-adds dQ for two consumers).
TEST(AttentionCuda, WarpSpecialisedBackwardTiles) {
  REQUIRE_GPU();
  backward_tiles("ws", "sm90_wgmma_ws");
}

// GQA backwards whose kv heads' query heads are shared out over several tiles (Overrides::bwd_head_splits, and
// the rule's own count): each split adds its dK / dV into fp32 accumulators, converted after. Groups of 8 and
// 4, every split count from none to one head per tile, dense, causal and windows at d64 / d128, and varlen
// (key blocks past a short sequence, an empty one), against the float64 reference.
TEST(AttentionCuda, GqaHeadSplitBackward) {
  REQUIRE_GPU();
  int major = 0, minor = 0;
  const bool hopper = hopper_path(major, minor);
  for (int splits : {0, 1, 2, 8})
    for (int D : {64, 128})
      for (int mode = 0; mode < 3; ++mode) {
        g_ov = {};
        ta::cuda::apply_override(g_ov, "sm90_backward=ws");
        g_ov.bwd_head_splits = splits;
        Case c = mk("gqa_split" + std::to_string(splits) + "_bf16_d" + std::to_string(D) + "_m" + std::to_string(mode),
                    ta::DType::bf16, 1, 300, 450, 16, D);
        c.Hkv = mode == 2 ? 4 : 2;
        c.causal = mode == 1;
        if (mode == 2) { c.wl = 150; c.wr = 40; }
        run_case(c);
        if (hopper) {
          Problem P;
          P.c = c;
          setup(P);
          // the rule: 8 or 16 tiles of whole groups are far under four waves, so one query head per tile
          const int want = splits == 0 ? 16 / c.Hkv : std::min(splits, 16 / c.Hkv);
          EXPECT_EQ(ta::cuda::choose(P.dp, ta::cuda::Pass::backward, g_ov).head_splits, want) << c.name;
        }
      }
  g_ov = {};
  ta::cuda::apply_override(g_ov, "sm90_backward=ws");  // (rows of at most 343 keys take one_wg by default)
  g_ov.bwd_head_splits = 4;
  Case c = mk("gqa_split4_f16_varlen_d128", ta::DType::f16, 0, 0, 0, 8, 128);
  c.Hkv = 2;
  c.varlen_q = {1, 130, 300, 7, 257};
  c.varlen_k = {7, 65, 343, 0, 256};
  c.causal = true;
  run_case(c);
  g_ov = {};
}

// A forward configuration's cases: both 16-bit types at a full and a padded head dim, ragged rows of nq x nk
// (plain, causal, a window, GQA), then varlen rows (short, empty, past a block) at the full head dim.
static void forward_variants(const std::string& tag, int full_dim, int padded_dim, int nq, int nk) {
  for (ta::DType t : {ta::DType::bf16, ta::DType::f16})
    for (int D : {full_dim, padded_dim})
      for (int mode = 0; mode < 4; ++mode) {
        Case c = mk(tag + "_" + tn(t) + "_d" + std::to_string(D) + "_m" + std::to_string(mode), t, 2, nq, nk, 4, D);
        c.causal = mode == 1;
        if (mode == 2) { c.wl = 100; c.wr = 30; }
        if (mode == 3) c.Hkv = 2;
        run_case(c);
      }
  Case v = mk(tag + "_bf16_varlen", ta::DType::bf16, 0, 0, 0, 2, full_dim);
  v.varlen_q = {1, 130, 300, 7};
  v.varlen_k = {7, 65, 343, 0};
  v.causal = true;
  run_case(v);
}

// Head dims 129..256 on the Hopper forward (the d256 bucket: 80-key blocks, two stages, O in 128 registers a
// thread; the backward stays portable), against the float64 reference.
TEST(AttentionCuda, HeadDim256Forward) {
  REQUIRE_GPU();
  forward_variants("d256fwd", 256, 160, 333, 517);
}

// The d64 forward with three consumers (Overrides::sm90_forward = wide; the rule's choice for long rows), over
// rows of many key blocks, against the float64 reference.
TEST(AttentionCuda, WideForwardD64) {
  REQUIRE_GPU();
  g_ov = {};
  ta::cuda::apply_override(g_ov, "sm90_forward=wide");
  int major = 0, minor = 0;
  if (hopper_path(major, minor)) {
    Problem P;
    P.c = mk("wide_select", ta::DType::bf16, 1, 64, 64, 2, 64);
    setup(P);
    EXPECT_STREQ(ta::cuda::forward_kernel(P.dp, g_ov), "sm90_wgmma_wide");
  }
  forward_variants("wide", 64, 40, 333, 1037);
  g_ov = {};
}

// A negative softmax scale (valid input) takes the portable kernels and stays exact.
TEST(AttentionCuda, NegativeScale) {
  REQUIRE_GPU();
  for (auto t : kTypes) {
    Case c = mk("negative_scale_" + tn(t), t, 2, 200, 150, 2, 64);
    c.scale = -0.2f; c.causal = true;
    run_case(c);
  }
}

// Which forward kernel a call takes: the Hopper path for fp16 / bf16 without
// score modifiers at head dims 33..128 on an H100/H200 built with sm_90a,
// the portable kernels otherwise; forcing the portable path works.
TEST(AttentionCuda, ForwardKernelSelection) {
  REQUIRE_GPU();
  Problem P;
  P.c = mk("select", ta::DType::bf16, 1, 64, 64, 2, 128);
  setup(P);
  int major = 0, minor = 0;
  const bool hopper = hopper_path(major, minor);
  ta::AttentionParams p = P.dp;
  EXPECT_STREQ(ta::cuda::forward_kernel(p), hopper ? "sm90_wgmma_persistent" : "portable_mma");
  p.causal = true;  // as many queries as keys: persistent too (tiles walked in heavy / light pairs)
  EXPECT_STREQ(ta::cuda::forward_kernel(p), hopper ? "sm90_wgmma_persistent" : "portable_mma");
  p.seqlen_q = 100;
  EXPECT_STREQ(ta::cuda::forward_kernel(p), hopper ? "sm90_wgmma" : "portable_mma");
  p.seqlen_q = P.dp.seqlen_q;
  p.causal = false;
  p.seqlen_k = 4097;  // long rows: one CTA per tile (the persistent kernel gains nothing there)
  EXPECT_STREQ(ta::cuda::forward_kernel(p), hopper ? "sm90_wgmma" : "portable_mma");
  p.seqlen_k = P.dp.seqlen_k;
  {  // d64 rows beyond 208 keys: 128-key blocks, not persistent
    p.head_dim = p.head_dim_v = 64;
    p.causal = true;
    p.seqlen_q = p.seqlen_k = 2048;
    EXPECT_STREQ(ta::cuda::forward_kernel(p), hopper ? "sm90_wgmma" : "portable_mma");
    p.seqlen_q = p.seqlen_k = 4096;
    EXPECT_STREQ(ta::cuda::forward_kernel(p), hopper ? "sm90_wgmma" : "portable_mma");
    p.causal = false;
    p.seqlen_q = p.seqlen_k = 1024;
    EXPECT_STREQ(ta::cuda::forward_kernel(p), hopper ? "sm90_wgmma" : "portable_mma");
    p.seqlen_q = p.seqlen_k = 65536;  // a head's K / V past L2: 128 rows share each block
    EXPECT_STREQ(ta::cuda::forward_kernel(p), hopper ? "sm90_wgmma_wide" : "portable_mma");
    p = P.dp;
  }
  p.head_dim = p.head_dim_v = 32;
  EXPECT_STREQ(ta::cuda::forward_kernel(p), "portable_mma");
  p = P.dp;
  p.head_dim = p.head_dim_v = 192;  // the d256 bucket: the Hopper forward, the portable backward
  EXPECT_STREQ(ta::cuda::forward_kernel(p), hopper ? "sm90_wgmma" : "portable_mma");
  EXPECT_STREQ(ta::cuda::backward_kernel(p), "portable_mma");
  p = P.dp;
  p.dropout_p = 0.1f;
  EXPECT_STREQ(ta::cuda::forward_kernel(p), "portable_mma");
  p = P.dp;
  p.scale = -p.scale;
  EXPECT_STREQ(ta::cuda::forward_kernel(p), "portable_mma");
  p = P.dp;
  ta::cuda::Overrides portable;
  portable.portable = true;
  EXPECT_STREQ(ta::cuda::forward_kernel(p, portable), "portable_mma");
  p.dtype = ta::DType::f32;
  EXPECT_STREQ(ta::cuda::forward_kernel(p), "f32_simt");
  std::printf("device compute %d.%d: bf16 d128 forward takes %s\n", major, minor, ta::cuda::forward_kernel(P.dp));
}

// The backward's main pass follows the same rule (the deterministic dQ pass
// is always the portable query-side kernel).
TEST(AttentionCuda, BackwardKernelSelection) {
  REQUIRE_GPU();
  Problem P;
  P.c = mk("select_bwd", ta::DType::f16, 1, 64, 64, 2, 64);
  setup(P);
  int major = 0, minor = 0;
  const bool hopper = hopper_path(major, minor);
  ta::AttentionParams p = P.dp;
  // one warpgroup per 64 keys (two CTAs per SM) for d64 rows of at most 208 keys and causal rows of at
  // most 512; the pair of warpgroups per 128 keys for d64 causal rows of at most 1024; otherwise the pair
  // with a producer warpgroup (ws); the deterministic mode, which has no dQ accumulator: the pair
  const char* short_rows = "sm90_wgmma_1wg";
  const char* mid_causal_d64 = "sm90_wgmma";
  const char* long_rows = "sm90_wgmma_ws";
  EXPECT_STREQ(ta::cuda::backward_kernel(p), hopper ? short_rows : "portable_mma");
  p.seqlen_k = 209;
  EXPECT_STREQ(ta::cuda::backward_kernel(p), hopper ? long_rows : "portable_mma");
  p.causal = true;
  EXPECT_STREQ(ta::cuda::backward_kernel(p), hopper ? short_rows : "portable_mma");
  p.seqlen_k = 1024;
  EXPECT_STREQ(ta::cuda::backward_kernel(p), hopper ? mid_causal_d64 : "portable_mma");
  p.seqlen_k = 1025;
  EXPECT_STREQ(ta::cuda::backward_kernel(p), hopper ? long_rows : "portable_mma");
  p.seqlen_k = 512;
  p.head_dim = p.head_dim_v = 96;
  EXPECT_STREQ(ta::cuda::backward_kernel(p), hopper ? short_rows : "portable_mma");
  p.seqlen_k = 513;
  EXPECT_STREQ(ta::cuda::backward_kernel(p), hopper ? long_rows : "portable_mma");
  p.causal = false;
  p.seqlen_k = 64;
  EXPECT_STREQ(ta::cuda::backward_kernel(p), hopper ? long_rows : "portable_mma");
  p.head_dim = p.head_dim_v = 64;
  EXPECT_STREQ(ta::cuda::backward_kernel(p), hopper ? short_rows : "portable_mma");
  p.seqlen_k = 4096;
  EXPECT_STREQ(ta::cuda::backward_kernel(p), hopper ? long_rows : "portable_mma");
  p = P.dp;
  p.deterministic = true;
  EXPECT_STREQ(ta::cuda::backward_kernel(p), hopper ? "sm90_wgmma" : "portable_mma");
  p = P.dp;
  p.head_dim = p.head_dim_v = 256;
  EXPECT_STREQ(ta::cuda::backward_kernel(p), "portable_mma");
  p = P.dp;
  ta::cuda::Overrides portable;
  portable.portable = true;
  EXPECT_STREQ(ta::cuda::backward_kernel(p, portable), "portable_mma");
  p.dtype = ta::DType::f32;
  EXPECT_STREQ(ta::cuda::backward_kernel(p), "f32_simt");
}

// The portable forward and backward stay exact on the shapes the Hopper path now takes.
TEST(AttentionCuda, PortableForwardForced) {
  REQUIRE_GPU();
  g_ov.portable = true;
  for (ta::DType t : {ta::DType::bf16, ta::DType::f16})
    for (int D : {64, 128}) {
      Case c = mk("portable_" + tn(t) + "_d" + std::to_string(D), t, 2, 300, 257, 4, D);
      c.Hkv = 2; c.causal = D == 64;
      run_case(c);
    }
  g_ov = {};
}

TEST(AttentionCuda, DropoutMatchesCpuMask) {
  REQUIRE_GPU();
  for (auto t : kTypes) {
    Case c = mk("dropout_" + tn(t), t, 2, 300, 343, 2, 64);
    c.dropout = 0.2f;
    c.causal = true;
    run_case(c);
    Case d = mk("dropout_bias_det_" + tn(t), t, 2, 65, 63, 2, 32);
    d.dropout = 0.5f;
    d.bias[0].on = true; d.bias[0].bcast_batch = true; d.bias[0].head_mod = 2;
    d.deterministic = true;
    run_case(d);
  }
}

TEST(AttentionCuda, DlseAndEmptyRows) {
  REQUIRE_GPU();
  for (bool f32 : {false, true}) {
    const std::string sfx = f32 ? "_f32" : "";
    Case c = mk("dlse" + sfx, or_f32(ta::DType::bf16, f32), 2, 300, 300, 2, 64);
    c.dlse = true;
    run_case(c);
    // causal with Nq > Nk: the first Nq - Nk rows see nothing (O = 0, LSE = -inf)
    Case e = mk("empty_rows" + sfx, or_f32(ta::DType::bf16, f32), 2, 300, 100, 2, 64);
    e.causal = true; e.dlse = true;
    run_case(e);
    // a bias that is -inf everywhere on some rows
    Case f = mk("neg_inf_bias" + sfx, or_f32(ta::DType::f16, f32), 1, 65, 65, 2, 32);
    f.bias[0].on = true; f.bias[0].head_mod = 2; f.bias[0].neg_inf_frac = 0.97f;
    run_case(f);
  }
}

TEST(AttentionCuda, StridedPackedQkv) {
  REQUIRE_GPU();
  for (auto t : kTypes) {
    Case c = mk("packed_qkv_" + tn(t), t, 2, 300, 300, 3, 64);
    c.packed_qkv = true;
    run_case(c);
  }
}

TEST(AttentionCuda, DeterministicRepeatable) {
  REQUIRE_GPU();
  for (auto t : kTypes) {
    Case c = mk("det_" + tn(t), t, 2, 1000, 1000, 4, 64);
    c.Hkv = 2; c.causal = true; c.deterministic = true;
    run_case(c);
  }
}

TEST(AttentionCuda, DeviceInfo) {
  REQUIRE_GPU();
  EXPECT_TRUE(ta::cuda::available());
  EXPECT_FALSE(ta::cuda::device_name(0).empty());
}

// Small enough for compute-sanitizer (memcheck, racecheck): every kernel once.
TEST(AttentionCuda, SanitizerSmall) {
  REQUIRE_GPU();
  for (auto t : {ta::DType::bf16, ta::DType::f32})
  for (int D : {16, 64, t == ta::DType::f32 ? 256 : 128})
    for (bool det : {false, true}) {
      Case c = mk("sanitizer_" + tn(t) + "_d" + std::to_string(D) + (det ? "_det" : ""), t, 2, 70, 65, 2, D);
      c.causal = true;
      c.bias[0].on = true; c.bias[0].bcast_batch = true; c.bias[0].head_mod = 2;
      c.bias[1].on = true; c.bias[1].batch_mod = 2; c.bias[1].bcast_head = true; c.bias[1].bcast_rows = true;
      c.deterministic = det;
      c.dropout = det ? 0.1f : 0.f;
      run_case(c);
    }
  // without score modifiers: the Hopper forward and backward where they apply
  for (int D : {64, 128}) {
    // d64: 420 keys, so the forward's consumer refills its 2-stage ring (tile_configs.cuh)
    Case c = mk("sanitizer_plain_bf16_d" + std::to_string(D), ta::DType::bf16, 2, 200, D == 64 ? 420 : 150, 4, D);
    c.Hkv = 2; c.causal = D == 64;
    run_case(c);
  }
  // the d64 backward's pair kernel (causal rows of 513..1024 keys) and warp-specialised kernel (the d128
  // call above takes the warp-specialised one too, its GQA group of 2 split over two tiles: dK / dV atomics)
  for (bool causal : {true, false}) {
    Case c = mk(causal ? "sanitizer_pair_bf16_d64" : "sanitizer_ws_bf16_d64", ta::DType::bf16, 2, 130,
                causal ? 600 : 300, 4, 64);
    c.causal = causal;
    run_case(c);
  }
  {  // the persistent d128 forward with more tiles (10 x 8 x 2 = 160) than an H200 has SMs (132)
    Case c = mk("sanitizer_persistent_bf16_d128", ta::DType::bf16, 10, 200, 150, 8, 128);
    run_case(c);
  }
  {  // ... and causal, tiles walked in heavy / light pairs: 3 query blocks x 16 heads x 6 = 288 tiles, 144
     // pairs (a pair may span two heads)
    Case c = mk("sanitizer_persistent_causal_bf16_d128", ta::DType::bf16, 6, 300, 300, 16, 128);
    c.causal = true;
    run_case(c);
  }
  // the d16 / d32 backward's WIN variant (one CTA per sequence and head)
  for (int D : {16, 32}) {
    Case w = mk("sanitizer_win_bf16_d" + std::to_string(D), ta::DType::bf16, 2, 70, 150, 2, D);
    w.bias[0].on = true; w.bias[0].dtype = ta::DType::bf16; w.bias[0].bcast_batch = true; w.bias[0].head_mod = 2;
    const uint64_t before = g_win_runs;
    run_case(w);
    EXPECT_EQ(g_win_runs - before, 1u);
  }
  // the d64 forward's one-block configuration (rows of 129..208 keys)
  Case c = mk("sanitizer_plain_bf16_d64_one_block", ta::DType::bf16, 2, 197, 197, 2, 64);
  run_case(c);
  // two packed 16-bit bias terms: the kModsBias kernels (tiles staged through shared memory;
  // d16's backward keeps one stage, d64's two)
  for (int D : {16, 64}) {
    Case sb = mk("sanitizer_staged_bias_bf16_d" + std::to_string(D), ta::DType::bf16, 2, 70, 65, 2, D);
    sb.causal = true;
    sb.bias[0].on = true; sb.bias[0].dtype = ta::DType::bf16; sb.bias[0].bcast_batch = true; sb.bias[0].head_mod = 2;
    sb.bias[1].on = true; sb.bias[1].dtype = ta::DType::bf16; sb.bias[1].batch_mod = 2; sb.bias[1].bcast_head = true;
    run_case(sb);
    // not causal: d16's backward takes its LEAN variant (with and without bias terms)
    if (D == 16) {
      sb.name = "sanitizer_lean_bias_bf16_d16";
      sb.causal = false;
      run_case(sb);
      Case pl = mk("sanitizer_lean_plain_bf16_d16", ta::DType::bf16, 2, 70, 65, 2, D);
      run_case(pl);
    }
  }
}
