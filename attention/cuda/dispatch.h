// Which kernel each pass of a call runs, and why: the one place that chooses
// (the tile shapes each kernel runs with are in tile_configs.cuh). Plain C++:
// explain() is host logic, callable without a GPU.
#pragma once

#include <string>
#include <vector>

#include "tessera/attention/params.h"

namespace tessera::attention::cuda {

// The passes of a call: the forward; the backward's main pass (dK, dV, and dQ into an fp32
// accumulator or dBias atomics where it has them); its dQ pass; the deterministic dBias pass.
enum class Pass { forward, backward, dq, dbias };

enum class Kernel {
  none,                     // the pass does not run
  f32_simt,                 // exact float32 (kernels/f32)
  portable,                 // sm_80+ mma.sync (kernels/sm80): one CTA per query (forward) or key block
  portable_lean,            // its backward for dense short rows at d16 / d32 (no masks, fixed length)
  portable_win,             // its backward with one CTA per window and head, dQ in shared memory
  portable_qside,           // the deterministic query-side dQ / dBias (kernels/sm80/bwd_det_kernel.cuh)
  dq_convert,               // dQ converted from the fp32 accumulator the main pass filled
  sm90_forward,             // Hopper wgmma forward (kernels/sm90), one CTA per query tile
  sm90_forward_row208,      // the same with one 208-key block: d64 rows of 129..208 keys (ViT's 197)
  sm90_forward_persistent,  // the d128 forward with one CTA per SM walking the tiles
  sm90_forward_wide,        // d64 with three consumers: 192 query rows share each K / V block (long rows)
  sm90_backward_one_wg,     // Hopper backward, one warpgroup per 64 keys: short rows
  sm90_backward_pair,       // two consumer warpgroups per 128 keys
  sm90_backward_ws,         // a producer warpgroup and two consumers per 128 keys
};

// How the portable fp16 / bf16 kernels take score modifiers: none; packed 16-bit bias
// terms only (staged beside the K / V tiles); everything (ALiBi, dropout, direct bias reads).
enum class Mods { none, bias, all };

// Choices that tests and benchmarks force; the defaults are the library's behaviour.
struct Overrides {
  enum class Sm90Forward { automatic, plain, persistent, wide };
  enum class Sm90Backward { automatic, one_wg, pair, ws };
  bool portable = false;                               // portable kernels where the Hopper ones would run
  Sm90Forward sm90_forward = Sm90Forward::automatic;   // persistent: d128 calls that allow it; wide: d64
  Sm90Backward sm90_backward = Sm90Backward::automatic;  // where the call has a dQ accumulator
  bool win_backward = true;      // the portable backward may take its WIN variant
  bool bias_mma = true;          // d16 / d32 packed bias added on the tensor cores where finite
  int qsplit = 0;                // d32 bias forward: CTAs per sequence and head (0: the tile config's, -1: one per block)
  int causal_chunk = -1;         // Hopper causal tiles ordered within chunks of this many heads (-1: each kernel's default)
  bool fwd_half_last = true;     // Hopper forward: 64-key last blocks where a tile's last keys allow
  bool fwd_lazy_rescale = true;  // Hopper d128 forward: O rescaled only where a row's max grows by more than 8
  bool bwd_rotate = true;        // Hopper backward: each tile walks its query blocks from a rotated start
  int bwd_head_splits = 0;       // Hopper ws backward with GQA: query-head splits per kv head (0: the rule's; the
                                 // largest divisor of the group at most this otherwise)
};

// Sets one field from "name=value" (the names are Overrides' fields; bench and doctor arguments);
// throws std::invalid_argument naming the setting on an unknown name or a bad value.
void apply_override(Overrides& ov, const std::string& setting);

struct Choice {
  Kernel kernel = Kernel::none;
  Mods mods = Mods::none;  // portable kernels
  int bucket = 0;          // head-dim bucket the fp16 / bf16 kernels pad to (16, 32, 64, 128, 256)
  int head_splits = 1;     // Hopper ws backward: tiles per key block and kv head, the group's query heads shared
                           // out among them, dK / dV added into fp32 accumulators when > 1
};

// arch: compute capability x 10 (80, 90, ...) the choice is for; 0: the current device's.
// `why`, when given, receives one line per check that decided.
Choice choose(const AttentionParams& p, Pass pass, const Overrides& ov = {}, int arch = 0,
              std::vector<std::string>* why = nullptr);
// Every pass of a forward and backward call: the kernel, its tile configuration and the reasons.
std::string explain(const AttentionParams& p, const Overrides& ov = {}, int arch = 0);

const char* kernel_name(Kernel k);
const char* pass_name(Pass pass);
const char* mods_name(Mods mods);
// Compute capability x 10 of the current device, 0 without one.
int device_arch();

}  // namespace tessera::attention::cuda
