// The kernel choice: named checks, each able to say why it refused, asked in one
// order per pass (docs/attention.md has the resulting table and the measurements
// behind each threshold). Host code only.
#include "dispatch.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "launch.cuh"
#include "tile_configs.cuh"

namespace tessera::attention::cuda {

static_assert(static_cast<int>(Mods::none) == kModsNone && static_cast<int>(Mods::bias) == kModsBias &&
                  static_cast<int>(Mods::all) == kModsAll,
              "Mods mirrors the kernels' MODS values");

namespace {

using Why = std::vector<std::string>;

void say(Why* why, const std::string& line) {
  if (why) why->push_back(line);
}

int head_dim_max(const AttentionParams& p) { return std::max(p.head_dim, p.head_dim_v); }

// Whether the d16 / d32 backward's staged-bias configuration fits shared memory (else Mods::all runs).
bool bwd_bias_staged(int bucket) {
  switch (bucket) {
    case 16: return BwdOf<__half, 16, BwdBiasTile<16>>::kBiasStaged;
    case 32: return BwdOf<__half, 32, BwdBiasTile<32>>::kBiasStaged;
    case 64: return BwdOf<__half, 64, BwdBiasTile<64>>::kBiasStaged;
    case 128: return BwdOf<__half, 128, BwdBiasTile<128>>::kBiasStaged;
    default: return BwdOf<__half, 256, BwdBiasTile<256>>::kBiasStaged;
  }
}

// The Hopper kernels: fp16 / bf16 at head dims 33..128 (buckets 64 and 128; the forward also 129..256,
// bucket 256) with 16-byte aligned rows, a positive scale and no bias, ALiBi or dropout, on a compute 9.0
// device from a build with the sm_90a image. Without `why` it stops at the first refusal (the device is
// asked last).
bool sm90_ok(const KArgs& a, const Overrides& ov, int arch, Why* why, bool forward) {
  const AttentionParams& p = a.p;
  bool ok = true;
  auto need = [&](bool cond, const char* refusal) {
    if (!cond) say(why, std::string("sm90: no, ") + refusal);
    ok = ok && cond;
    return ok || why;
  };
#if !defined(TESSERA_SM90A)
  if (!need(false, "the library was built without the sm_90a image")) return false;
#endif
  const int d = head_dim_max(p);
  if (!need(!ov.portable, "Overrides::portable")) return false;
  if (!need(p.dtype != DType::f32, "float32 (the exact SIMT kernels)")) return false;
  if (!need(a.vec_ok, "a row not 16-byte aligned or a head dim not a multiple of 8")) return false;
  const int d_max = forward ? 256 : 128;
  if (!need(d > 32 && d <= d_max, forward ? "head dim outside 33..256" : "head dim outside 33..128")) return false;
  if (!need(p.num_bias == 0, "bias terms (the Hopper kernels add none)")) return false;
  if (!need(p.alibi_slopes == nullptr, "ALiBi")) return false;
  if (!need(!a.dropout, "dropout")) return false;
  if (!need(p.scale > 0.f, "scale <= 0 (the forward takes the row max of unscaled scores)")) return false;
  const int cc = arch > 0 ? arch : device_arch();
  if (!need(cc == 90, "the device is not compute 9.0")) return false;
  if (ok)
    say(why, std::string("sm90: yes (16-bit, aligned, head dim 33..") + (forward ? "256" : "128") +
                 ", no bias / ALiBi / dropout, compute 9.0)");
  return ok;
}

Kernel fwd90_kernel(const AttentionParams& p, int bucket, const Overrides& ov, Why* why) {
  using F = Overrides::Sm90Forward;
  if (bucket == 256) {
    if (ov.sm90_forward == F::persistent) say(why, "persistent: no d256 configuration");
    say(why, "d256: 80-key blocks, two stages (O holds 128 registers a thread)");
    return Kernel::sm90_forward;
  }
  if (bucket == 128) {
    if (ov.sm90_forward == F::plain) {
      say(why, "persistent: no, Overrides::sm90_forward = plain");
    } else if (!fwd90_persistable(p)) {
      say(why, "persistent: no, varlen, window, causal with Nq != Nk, or no keys");
    } else if (ov.sm90_forward == F::persistent || p.seqlen_k <= 4096) {
      say(why, ov.sm90_forward == F::persistent ? "persistent: yes, Overrides::sm90_forward"
                                                 : "persistent: yes, rows of at most 4096 keys");
      return Kernel::sm90_forward_persistent;
    } else {
      say(why, "persistent: no, rows of more than 4096 keys");
    }
    return Kernel::sm90_forward;
  }
  if (ov.sm90_forward == F::persistent) say(why, "persistent: no d64 configuration (it lost at every length)");
  // Wide: three consumers' 192 query rows share each K / V block, where the small CTAs read it once per 64
  // rows. On long rows those reads dominate: a head's K / V (256 bytes a key) outgrows L2 and the small CTAs,
  // drifting apart along the row, re-read it from DRAM. On short rows the small CTAs win by overlapping one
  // another's loads, softmax and epilogue; causal rows, half as long on average, keep them longer. Windows
  // read a band of keys, which L2 holds; a few queries share nothing and would fill a third of a wide tile.
  const int wide_keys = p.causal ? 8192 : 4096;
  const bool window = p.window_left >= 0 || p.window_right >= 0;
  const bool long_rows = std::min(p.seqlen_q, p.seqlen_k) >= wide_keys && !window;
  if (ov.sm90_forward == F::wide || (ov.sm90_forward != F::plain && long_rows)) {
    say(why, ov.sm90_forward == F::wide ? "wide: yes, Overrides::sm90_forward"
                                        : std::string("wide: yes, ") + (p.causal ? "causal " : "") +
                                              "rows of at least " + std::to_string(wide_keys) + " queries and keys");
    return Kernel::sm90_forward_wide;
  }
  if (p.seqlen_k > Fwd90Tile64::key_block && p.seqlen_k <= Fwd90Tile64Row208::key_block) {
    say(why, "row208: yes, rows of 129..208 keys fit one block");
    return Kernel::sm90_forward_row208;
  }
  return Kernel::sm90_forward;
}

// The Hopper backward's main kernel at bucket d (64 or 128).
Kernel bwd90_kernel(const AttentionParams& p, int d, bool dq_accum, const Overrides& ov, Why* why) {
  using B = Overrides::Sm90Backward;
  if (!dq_accum) {
    say(why, "pair: the deterministic mode (dK / dV only)");
    return Kernel::sm90_backward_pair;
  }
  switch (ov.sm90_backward) {
    case B::one_wg: say(why, "Overrides::sm90_backward"); return Kernel::sm90_backward_one_wg;
    case B::pair: say(why, "Overrides::sm90_backward"); return Kernel::sm90_backward_pair;
    case B::ws: say(why, "Overrides::sm90_backward"); return Kernel::sm90_backward_ws;
    case B::automatic: break;
  }
  if ((d <= 64 && p.seqlen_k <= 208) || (p.causal && p.seqlen_k <= 512)) {
    say(why, "one_wg: short rows (d64 up to 208 keys, causal up to 512)");
    return Kernel::sm90_backward_one_wg;
  }
  if (d <= 64 && p.causal && p.seqlen_k <= 1024) {
    say(why, "pair: d64 causal rows of 513..1024 keys");
    return Kernel::sm90_backward_pair;
  }
  say(why, "ws: longer rows");
  return Kernel::sm90_backward_ws;
}

// GQA on the warp-specialised backward: the query heads of a kv head shared out over several tiles, whose dK /
// dV are added into fp32 accumulators (converted after). With the whole group in one tile a call has only key
// blocks x kv heads x sequences tiles, each as long as the group (16 / 2 heads over 8k keys: 128 tiles for 132
// SMs), and under a causal mask the launch lasts as long as its heaviest tile. The smallest divisor of the group
// that gives four waves of tiles on an H100 / H200 (132 SMs), eight under a causal mask (its tiles differ in
// length by up to the row's query blocks, so the last wave's imbalance needs finer tiles to even out), so that
// the heaviest-first order can even them out; each split adds one fp32 add per dK / dV element.
int bwd90_head_splits(const AttentionParams& p, Kernel k, const Overrides& ov, Why* why) {
  const int group = p.heads_q / std::max(1, p.heads_kv);
  if (k != Kernel::sm90_backward_ws || group <= 1) return 1;
  if (ov.bwd_head_splits > 0) {
    int s = std::min(ov.bwd_head_splits, group);
    while (group % s) --s;
    say(why, "head splits " + std::to_string(s) + ": Overrides::bwd_head_splits");
    return s;
  }
  constexpr int64_t kSms = 132;
  const int64_t waves = p.causal ? 8 : 4;
  const int64_t tiles = int64_t{(p.seqlen_k + 127) / 128} * p.heads_kv * p.batch;
  int s = 1;
  while (s < group && tiles * s < waves * kSms)
    do ++s;
    while (group % s);
  say(why, "head splits " + std::to_string(s) + ": " + std::to_string(tiles) + " tiles of whole groups (" +
               std::to_string(group) + " query heads) " + (s > 1 ? "are under " : "fill ") +
               (p.causal ? "eight" : "four") + " waves of 132 SMs");
  return s;
}

Choice f32_choice(const AttentionParams& p, Pass pass, Why* why) {
  Choice c;
  c.kernel = Kernel::f32_simt;
  say(why, "float32: the exact SIMT kernels");
  if (pass == Pass::dbias) {
    bool any = false;
    for (int t = 0; t < p.num_bias; ++t) any = any || needs_det_dbias(p, t);
    if (!any) c.kernel = Kernel::none;
  }
  return c;
}

}  // namespace

// Every tile with keys, and tiles of equal work or causal with as many queries as keys (the static
// walk balances those), fixed length.
bool fwd90_persistable(const AttentionParams& p) {
  return (!p.causal || p.seqlen_q == p.seqlen_k) && p.window_left < 0 && p.window_right < 0 &&
         p.cu_seqlens_q == nullptr && p.seqlen_k > 0;
}

int mods_kind(const KArgs& a, bool bwd) {
  const AttentionParams& p = a.p;
  if (p.num_bias == 0 && p.alibi_slopes == nullptr && !a.dropout) return kModsNone;
  if (p.alibi_slopes != nullptr || a.dropout) return kModsAll;
  for (int t = 0; t < p.num_bias; ++t) {
    if (!a.pk[t].ptr || p.bias[t].dtype == DType::f32) return kModsAll;
    if (bwd && a.any_bias_grad && p.bias[t].grad && !a.pk[t].grad) return kModsAll;
  }
  return kModsBias;
}

bool bwd_lean_ok(const KArgs& a, int D) {
  const AttentionParams& p = a.p;
  return D <= 32 && !p.cu_seqlens_q && !p.causal && p.window_left < 0 && p.window_right < 0 && a.vec_ok &&
         p.head_dim == D && p.head_dim_v == D && a.dq_accum != nullptr && a.dq_accum_d % 4 == 0 &&
         reinterpret_cast<uintptr_t>(a.dq_accum) % 16 == 0 && a.row_stats != nullptr;
}

bool bwd_win_ok(const KArgs& a, const Overrides& ov) {
  const AttentionParams& p = a.p;
  return ov.win_backward && p.dtype != DType::f32 && !p.deterministic && (p.head_dim == 16 || p.head_dim == 32) &&
         p.head_dim_v == p.head_dim && !p.cu_seqlens_q && !p.causal && p.window_left < 0 && p.window_right < 0 &&
         a.vec_ok && p.heads_q == p.heads_kv && p.seqlen_q > 0 && p.seqlen_q <= win_max_rows(p.head_dim) &&
         p.seqlen_k > 0 && mods_kind(a, true) == kModsBias;
}

bool uses_dq_accum(const AttentionParams& p) { return !p.deterministic && p.dtype != DType::f32; }

bool uses_row_stats(const AttentionParams& p) { return p.dtype != DType::f32; }

// Every (b, h, i) reads a distinct bias element: atomics onto zeros are exact.
bool bias_unique(const AttentionParams& p, const BiasTerm& t) {
  const bool ub = p.batch == 1 || (t.batch_stride != 0 && t.batch_mod >= p.batch);
  const bool uh = p.heads_q == 1 || (t.head_stride != 0 && t.head_mod >= p.heads_q);
  const bool ur = p.seqlen_q <= 1 || t.row_stride != 0;
  return ub && uh && ur;
}

bool needs_det_dbias(const AttentionParams& p, int t) {
  return p.deterministic && p.bias[t].grad && !bias_unique(p, p.bias[t]);
}

int bucket_of(int d) {
  if (d <= 16) return 16;
  if (d <= 32) return 32;
  if (d <= 64) return 64;
  if (d <= 128) return 128;
  if (d <= 256) return 256;
  throw std::invalid_argument("tessera attention CUDA: head dim > 256 is not supported");
}

Choice choose(const KArgs& a, Pass pass, const Overrides& ov, int arch, Why* why) {
  const AttentionParams& p = a.p;
  if (p.dtype == DType::f32) return f32_choice(p, pass, why);
  Choice c;
  c.bucket = bucket_of(head_dim_max(p));
  switch (pass) {
    case Pass::forward: {
      // (why: every check is asked, to say why the Hopper kernels refused)
      if ((c.bucket == 64 || c.bucket == 128 || c.bucket == 256 || why) && sm90_ok(a, ov, arch, why, true)) {
        c.kernel = fwd90_kernel(p, c.bucket, ov, why);
        return c;
      }
      c.kernel = Kernel::portable;
      c.mods = static_cast<Mods>(mods_kind(a, false));
      return c;
    }
    case Pass::backward: {
      if ((c.bucket == 64 || c.bucket == 128 || why) && sm90_ok(a, ov, arch, why, false)) {
        c.kernel = bwd90_kernel(p, c.bucket, a.dq_accum != nullptr, ov, why);
        c.head_splits = bwd90_head_splits(p, c.kernel, ov, why);
        return c;
      }
      if (a.win) {
        say(why, "win: d16 / d32 windows of at most " + std::to_string(win_max_rows(p.head_dim)) +
                     " rows with staged bias, equal heads, non-deterministic");
        c.kernel = Kernel::portable_win;
        c.mods = Mods::bias;
        return c;
      }
      int mods = mods_kind(a, true);
      if (mods == kModsBias && !bwd_bias_staged(c.bucket)) {
        say(why, "mods: staged bias tiles do not fit shared memory at this head dim");
        mods = kModsAll;
      }
      c.mods = static_cast<Mods>(mods);
      const bool lean = c.bucket <= 32 && mods != kModsAll && bwd_lean_ok(a, c.bucket);
      if (lean) say(why, "lean: dense fixed-length rows at head dim 16 / 32 with the dQ accumulator");
      c.kernel = lean ? Kernel::portable_lean : Kernel::portable;
      return c;
    }
    case Pass::dq:
      if (a.win) c.kernel = Kernel::none;
      else if (uses_dq_accum(p)) c.kernel = Kernel::dq_convert;
      else c.kernel = Kernel::portable_qside;
      if (c.kernel == Kernel::portable_qside) say(why, "deterministic: the query-side dQ kernel");
      return c;
    case Pass::dbias: {
      bool any = false;
      for (int t = 0; t < p.num_bias; ++t) any = any || needs_det_dbias(p, t);
      c.kernel = any ? Kernel::portable_qside : Kernel::none;
      if (any) say(why, "deterministic broadcast bias gradient: the query-side dBias kernel");
      return c;
    }
  }
  return c;
}

Choice choose(const AttentionParams& p, Pass pass, const Overrides& ov, int arch, Why* why) {
  KArgs a = plan_args(p, pass != Pass::forward, ov);
  // (the backward leaves the deterministic pass's gradients out of the main pass's arguments; it gives
  // them back for the dbias pass)
  if (pass == Pass::dbias)
    for (int t = 0; t < p.num_bias; ++t) a.p.bias[t].grad = p.bias[t].grad;
  return choose(a, pass, ov, arch, why);
}

int device_arch() {
  static std::atomic<int> cache[64];  // 0 unknown, else compute capability x 10 + 1
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    cudaGetLastError();  // (no device: clear the sticky error)
    return 0;
  }
  int c = cache[dev].load();
  if (c == 0) {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    c = major * 10 + minor + 1;
    cache[dev].store(c);
  }
  return c - 1;
}

const char* kernel_name(Kernel k) {
  switch (k) {
    case Kernel::none: return "none";
    case Kernel::f32_simt: return "f32_simt";
    case Kernel::portable: return "portable";
    case Kernel::portable_lean: return "portable_lean";
    case Kernel::portable_win: return "portable_win";
    case Kernel::portable_qside: return "portable_qside";
    case Kernel::dq_convert: return "dq_convert";
    case Kernel::sm90_forward: return "sm90_forward";
    case Kernel::sm90_forward_row208: return "sm90_forward_row208";
    case Kernel::sm90_forward_persistent: return "sm90_forward_persistent";
    case Kernel::sm90_forward_wide: return "sm90_forward_wide";
    case Kernel::sm90_backward_one_wg: return "sm90_backward_one_wg";
    case Kernel::sm90_backward_pair: return "sm90_backward_pair";
    case Kernel::sm90_backward_ws: return "sm90_backward_ws";
  }
  return "?";
}

const char* pass_name(Pass pass) {
  switch (pass) {
    case Pass::forward: return "forward";
    case Pass::backward: return "backward";
    case Pass::dq: return "dq";
    case Pass::dbias: return "dbias";
  }
  return "?";
}

const char* mods_name(Mods mods) {
  switch (mods) {
    case Mods::none: return "none";
    case Mods::bias: return "bias";
    case Mods::all: return "all";
  }
  return "?";
}

std::string explain(const AttentionParams& p, const Overrides& ov, int arch) {
  std::ostringstream out;
  const int cc = arch > 0 ? arch : device_arch();
  if (cc == 0) out << "attention CUDA dispatch with no CUDA device here (an arch, e.g. 90, explains one)\n";
  else out << "attention CUDA dispatch for compute " << cc / 10 << "." << cc % 10 << (arch > 0 ? "" : " (this device)") << "\n";
  for (Pass pass : {Pass::forward, Pass::backward, Pass::dq, Pass::dbias}) {
    Why why;
    const Choice c = choose(p, pass, ov, cc, &why);
    out << pass_name(pass) << ": " << kernel_name(c.kernel);
    if (c.kernel != Kernel::none && c.bucket) out << ", head-dim bucket " << c.bucket;
    if (c.head_splits > 1) out << ", " << c.head_splits << " head splits";
    if (c.kernel == Kernel::portable || c.kernel == Kernel::portable_lean || c.kernel == Kernel::portable_win)
      out << ", mods " << mods_name(c.mods);
    out << "\n";
    for (const std::string& w : why) out << "  - " << w << "\n";
  }
  return out.str();
}

void apply_override(Overrides& ov, const std::string& setting) {
  const size_t eq = setting.find('=');
  const std::string name = setting.substr(0, eq), value = eq == std::string::npos ? "" : setting.substr(eq + 1);
  auto bad = [&]() { return std::invalid_argument("attention override '" + setting + "': bad value"); };
  auto flag = [&](bool& f) {
    if (value == "1" || value == "on") f = true;
    else if (value == "0" || value == "off") f = false;
    else throw bad();
  };
  auto number = [&](int& n) {
    char* end = nullptr;
    const long v = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || v < -1 || v > 1024) throw bad();
    n = static_cast<int>(v);
  };
  using F = Overrides::Sm90Forward;
  using B = Overrides::Sm90Backward;
  if (name == "portable") flag(ov.portable);
  else if (name == "win_backward") flag(ov.win_backward);
  else if (name == "bias_mma") flag(ov.bias_mma);
  else if (name == "fwd_half_last") flag(ov.fwd_half_last);
  else if (name == "fwd_lazy_rescale") flag(ov.fwd_lazy_rescale);
  else if (name == "bwd_rotate") flag(ov.bwd_rotate);
  else if (name == "qsplit") number(ov.qsplit);
  else if (name == "causal_chunk") number(ov.causal_chunk);
  else if (name == "bwd_head_splits") number(ov.bwd_head_splits);
  else if (name == "sm90_forward") {
    if (value == "auto") ov.sm90_forward = F::automatic;
    else if (value == "plain") ov.sm90_forward = F::plain;
    else if (value == "persistent") ov.sm90_forward = F::persistent;
    else if (value == "wide") ov.sm90_forward = F::wide;
    else throw bad();
  } else if (name == "sm90_backward") {
    if (value == "auto") ov.sm90_backward = B::automatic;
    else if (value == "one_wg") ov.sm90_backward = B::one_wg;
    else if (value == "pair") ov.sm90_backward = B::pair;
    else if (value == "ws") ov.sm90_backward = B::ws;
    else throw bad();
  } else {
    throw std::invalid_argument("attention override '" + setting +
                                "': unknown name (portable, sm90_forward, sm90_backward, win_backward, bias_mma, "
                                "qsplit, causal_chunk, fwd_half_last, fwd_lazy_rescale, bwd_rotate, bwd_head_splits)");
  }
}

}  // namespace tessera::attention::cuda
