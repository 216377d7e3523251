// Entry points of the exact tiled CPU path (picks the widest instruction set
// the processor supports at run time).
#pragma once

#include "tessera/attention/params.h"

namespace tessera::attention::cpu {

void forward(const AttentionParams& p);
void backward(const AttentionParams& p);
const char* isa_name();  // "avx512", "avx2" or "generic"

}  // namespace tessera::attention::cpu
