// libFuzzer target for the safetensors header parser: any byte string is
// treated as a whole file. The parser may reject it (FormatError) but must
// never crash, read out of bounds or accept an entry outside the data.
#include <cstdlib>

#include "tessera/models/safetensors_header.h"

namespace st = tessera::models::safetensors;

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
  try {
    const st::Header h = st::parse_header(data, size, "fuzz");
    // What the loader relies on after a successful parse.
    const uint64_t data_size = size - h.data_start();
    uint64_t covered = 0;
    for (const auto& t : h.tensors) {
      if (t.begin != covered || t.end > data_size || t.end - t.begin != t.numel() * st::dtype_size(t.dtype)) std::abort();
      covered = t.end;
    }
    if (covered != data_size) std::abort();
  } catch (const st::FormatError&) {
  }
  return 0;
}
