// Standalone GPU-test build only (tests/gpu configured on its own): the two
// helpers of attention/src/attention.cpp that the reference links against.
#include "tessera/attention/params.h"

namespace tessera::attention {
const char* dtype_name(DType t) { return t == DType::f32 ? "float32" : t == DType::f16 ? "float16" : "bfloat16"; }
int dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }
}  // namespace tessera::attention
