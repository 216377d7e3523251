// Host-only check (no GPU needed) of the portable kernels' dispatch rules
// (attention/cuda/dispatch.cu): which modifier variant a call takes (mods_kind) and
// when the d16 / d32 backward may take its LEAN variant (bwd_lean_ok). The LEAN
// kernel assumes no varlen, causal or window masking, aligned full-width rows,
// the dQ accumulator and the row statistics; each of those, when missing, must
// keep a call on the general kernel. The WIN variant (bwd_win_ok: one CTA per sequence and
// head at d16 / d32) goes without the dQ accumulator and the row statistics, so the host must only
// choose it where the kernel exists: head dims 16 and 32 exactly, staged bias (kModsBias), equal
// heads, the non-deterministic mode and at most win_max_rows query rows (448 at d16, 416 at d32).
#include <cstdio>
#include <functional>

#include "cuda/launch.cuh"

using namespace tessera::attention;
using namespace tessera::attention::cuda;

namespace {

int bad = 0;

void expect(bool got, bool want, const char* what) {
  if (got != want) {
    std::printf("%s: got %d, expected %d\n", what, got, want);
    ++bad;
  }
}

// A Swin window call as the backward sees it: bf16, d16, two packed 16-bit terms whose
// dBias is accumulated packed, the dQ accumulator and the row statistics in place.
KArgs swin_args() {
  alignas(16) static float dq[64], stats[64], grad[64];
  static unsigned short bias_tiles[64];
  KArgs a{};
  AttentionParams& p = a.p;
  p.dtype = DType::bf16;
  p.batch = 6; p.seqlen_q = p.seqlen_k = 343; p.heads_q = p.heads_kv = 3; p.head_dim = p.head_dim_v = 16;
  p.num_bias = 2;
  for (int t = 0; t < 2; ++t) {
    p.bias[t].dtype = DType::bf16;
    p.bias[t].grad = grad;
    a.pk[t].ptr = bias_tiles;
    a.pk[t].grad = grad;
  }
  a.any_bias_grad = true;
  a.vec_ok = true;
  a.dq_accum = dq;
  a.dq_accum_d = 16;
  a.row_stats = stats;
  return a;
}

void lean_case(const char* what, bool want, const std::function<void(KArgs&)>& change) {
  KArgs a = swin_args();
  change(a);
  expect(bwd_lean_ok(a, 16), want, what);
}

void win_case(const char* what, bool want, const std::function<void(KArgs&)>& change) {
  KArgs a = swin_args();
  change(a);
  expect(bwd_win_ok(a, Overrides{}), want, what);
}

}  // namespace

int main() {
  const KArgs s = swin_args();
  expect(mods_kind(s, true) == kModsBias, true, "swin backward takes kModsBias");
  expect(mods_kind(s, false) == kModsBias, true, "swin forward takes kModsBias");
  expect(bwd_lean_ok(s, 16), true, "swin d16 backward is LEAN");
  expect(bwd_lean_ok(s, 32), false, "head dim 16 is not the d32 bucket's LEAN kernel");
  expect(bwd_lean_ok(s, 64), false, "no LEAN kernel at d64");

  static int cu[3] = {0, 10, 20};
  static float slopes[3];
  alignas(16) static float dq[64];
  lean_case("varlen", false, [](KArgs& a) { a.p.cu_seqlens_q = a.p.cu_seqlens_k = cu; });
  lean_case("causal", false, [](KArgs& a) { a.p.causal = true; });
  lean_case("left window", false, [](KArgs& a) { a.p.window_left = 8; });
  lean_case("right window", false, [](KArgs& a) { a.p.window_right = 0; });
  lean_case("unaligned rows", false, [](KArgs& a) { a.vec_ok = false; });
  lean_case("head dim 12 in the d16 bucket", false, [](KArgs& a) { a.p.head_dim = a.p.head_dim_v = 12; });
  lean_case("value head dim differs", false, [](KArgs& a) { a.p.head_dim_v = 8; });
  lean_case("deterministic (no dQ accumulator)", false, [](KArgs& a) { a.dq_accum = nullptr; });
  lean_case("dQ accumulator not 16-byte aligned", false, [](KArgs& a) { a.dq_accum = dq + 1; });
  lean_case("no row statistics (fp32 data)", false, [](KArgs& a) { a.row_stats = nullptr; });
  lean_case("GQA", true, [](KArgs& a) { a.p.heads_q = 6; });
  lean_case("no bias terms", true, [](KArgs& a) { a.p.num_bias = 0; });

  expect(bwd_win_ok(s, Overrides{}), true, "swin d16 backward takes WIN");
  Overrides no_win;
  no_win.win_backward = false;
  expect(bwd_win_ok(s, no_win), false, "Overrides::win_backward off");
  win_case("no dQ accumulator or row statistics (WIN needs neither)", true,
           [](KArgs& a) { a.dq_accum = nullptr; a.row_stats = nullptr; });
  win_case("win_max_rows query rows", true, [](KArgs& a) { a.p.seqlen_q = 448; });
  win_case("one query row", true, [](KArgs& a) { a.p.seqlen_q = 1; });
  win_case("many key blocks", true, [](KArgs& a) { a.p.seqlen_k = 5000; });
  win_case("fp16", true, [](KArgs& a) { a.p.dtype = DType::f16; });
  win_case("one query row too many", false, [](KArgs& a) { a.p.seqlen_q = 449; });
  win_case("d32", true, [](KArgs& a) { a.p.head_dim = a.p.head_dim_v = 32; });
  win_case("d32, its win_max_rows query rows", true,
           [](KArgs& a) { a.p.head_dim = a.p.head_dim_v = 32; a.p.seqlen_q = 416; });
  win_case("d32, one query row too many", false,
           [](KArgs& a) { a.p.head_dim = a.p.head_dim_v = 32; a.p.seqlen_q = 417; });
  win_case("d64", false, [](KArgs& a) { a.p.head_dim = a.p.head_dim_v = 64; });
  win_case("head dim 24 in the d32 bucket", false, [](KArgs& a) { a.p.head_dim = a.p.head_dim_v = 24; });
  win_case("no query rows", false, [](KArgs& a) { a.p.seqlen_q = 0; });
  win_case("no keys", false, [](KArgs& a) { a.p.seqlen_k = 0; });
  win_case("fp32", false, [](KArgs& a) { a.p.dtype = DType::f32; });
  win_case("deterministic", false, [](KArgs& a) { a.p.deterministic = true; });
  win_case("head dim 12 in the d16 bucket", false, [](KArgs& a) { a.p.head_dim = a.p.head_dim_v = 12; });
  win_case("value head dim differs", false, [](KArgs& a) { a.p.head_dim_v = 8; });
  win_case("GQA", false, [](KArgs& a) { a.p.heads_q = 6; });
  win_case("varlen", false, [](KArgs& a) { a.p.cu_seqlens_q = a.p.cu_seqlens_k = cu; });
  win_case("causal", false, [](KArgs& a) { a.p.causal = true; });
  win_case("window", false, [](KArgs& a) { a.p.window_left = 8; });
  win_case("unaligned rows", false, [](KArgs& a) { a.vec_ok = false; });
  win_case("no bias terms (kModsNone)", false, [](KArgs& a) { a.p.num_bias = 0; });
  win_case("dBias not packed (kModsAll)", false, [](KArgs& a) { a.pk[1].grad = nullptr; });
  win_case("ALiBi (kModsAll)", false, [](KArgs& a) { a.p.alibi_slopes = slopes; });

  auto mods = [](const std::function<void(KArgs&)>& change, bool bwd) {
    KArgs a = swin_args();
    change(a);
    return mods_kind(a, bwd);
  };
  expect(mods([](KArgs& a) { a.p.num_bias = 0; }, true) == kModsNone, true, "no modifiers: kModsNone");
  expect(mods([](KArgs& a) { a.p.alibi_slopes = slopes; }, true) == kModsAll, true, "ALiBi: kModsAll");
  expect(mods([](KArgs& a) { a.dropout = true; }, false) == kModsAll, true, "dropout: kModsAll");
  expect(mods([](KArgs& a) { a.p.bias[1].dtype = DType::f32; }, true) == kModsAll, true, "fp32 term: kModsAll");
  expect(mods([](KArgs& a) { a.pk[0].ptr = nullptr; }, false) == kModsAll, true, "unpacked term: kModsAll");
  expect(mods([](KArgs& a) { a.pk[1].grad = nullptr; }, true) == kModsAll, true,
         "dBias not packed: the backward takes kModsAll");
  expect(mods([](KArgs& a) { a.pk[1].grad = nullptr; }, false) == kModsBias, true,
         "dBias not packed: the forward keeps kModsBias");
  expect(mods([](KArgs& a) { a.pk[1].grad = nullptr; a.p.bias[1].grad = nullptr; }, true) == kModsBias, true,
         "a term without a gradient stays kModsBias");

  if (bad) {
    std::printf("%d dispatch rule(s) wrong\n", bad);
    return 1;
  }
  std::printf("dispatch rules: ok\n");
  return 0;
}
