// Entry points of the fused attention module.
//
//   O = softmax(Q Kᵀ · scale + bias + alibi + mask) · V     (dropout on the softmax)
//
// forward() writes o and lse; backward() reads q, k, v, o, lse, dout and
// writes dq, dk, dv and the grad of every bias term that asks for one.
// Both throw tessera::attention::Error (a std::invalid_argument / runtime_error)
// naming the offending argument; validate() runs the same checks alone.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include "tessera/attention/params.h"

namespace tessera::attention {

struct Error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Throws Error on any inconsistent size, stride, pointer or option.
// `for_backward` also checks the gradient tensors.
void validate(const AttentionParams& p, bool for_backward);
// The varlen offsets' checks alone, on host copies: validate() cannot read
// device-resident offsets, so callers holding CUDA ones check their copies here.
void validate_cu_seqlens(const int32_t* cu_q, const int32_t* cu_k, int batch, int total_q, int total_k, int max_q,
                         int max_k);

void forward(const AttentionParams& p);
void backward(const AttentionParams& p);

// Bytes of caller-provided scratch memory backward() needs (0 on the CPU
// path, which manages its own).
size_t backward_workspace_bytes(const AttentionParams& p);
// Bytes of scratch memory forward() uses when given (AttentionParams::workspace): CUDA
// bias terms are then read from fragment-ordered copies. Never more than
// backward_workspace_bytes(p), so a backward workspace serves a forward too.
size_t forward_workspace_bytes(const AttentionParams& p);

// Bias term t in a pass's fragment order, made once and handed to later calls through
// BiasTerm::packed (CUDA fp16 / bf16; the copy depends on the term's values and layout and
// on p's sizes and dtype, and differs between forward and backward).
// packed_bias_term_bytes: its size, 0 where this pass does not read term t packed.
// pack_bias_term: writes it to dst (device memory, 16-byte aligned) on p.stream.
size_t packed_bias_term_bytes(const AttentionParams& p, int t, bool backward);
void pack_bias_term(const AttentionParams& p, int t, bool backward, void* dst);

// What was compiled in; used by `tessera doctor`.
bool cuda_compiled();
bool cuda_available();   // compiled and a device is present
std::string cuda_device_name(int device = 0);
const char* cpu_isa();   // instruction set the CPU path runs: avx512, avx2 or generic

}  // namespace tessera::attention
