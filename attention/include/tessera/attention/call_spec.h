// A call described in words, for explaining which CUDA kernels it would run without
// running it: "dtype=bf16 d=64 nq=197 nk=197 causal bias". The params it makes point at
// placeholder memory (aligned, never read): they are for explain_cuda_dispatch, not for forward().
//
// Words: dtype=bf16|f16|f32, d=N (head dim), dv=N, nq=N, nk=N, b=N (batch, default 2), h=N (query
// heads, default 4), hkv=N, window=N (left), and the flags causal, window (left 256), varlen, gqa
// (8 query heads over 2), bias (a relative-position bias [H, Nq, Nk] in the data's type),
// bias_f32, bias_grad, alibi, dropout, deterministic, unaligned (Q not 16-byte aligned), no_ws
// (a forward without a workspace).
#pragma once

#include <string>
#include <vector>

#include "tessera/attention/params.h"

namespace tessera::attention {

// Throws Error naming the word on an unknown word or a bad number.
AttentionParams call_spec_params(const std::string& spec);

// Every pass's CUDA kernel for the call `spec` and why (cuda::explain), with overrides
// "NAME=VALUE" (docs/attention.md, Options) on compute capability arch x 10 (0: this device).
// Throws Error when this build has no CUDA kernels.
std::string explain_cuda_dispatch(const std::string& spec, const std::vector<std::string>& overrides = {},
                                  int arch = 0);

}  // namespace tessera::attention
