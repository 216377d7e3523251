// libFuzzer target for the PyTorch checkpoint readers: input starting with
// "PK" is a whole zip archive (central directory, local headers), anything
// else a data.pkl, run through the restricted pickle reader, the state-dict
// selection and the extent checks exactly as the loader does. Errors must be
// FormatError; a crash, leak, out-of-range read or accepted out-of-storage
// view is a finding.
#include <cstdlib>

#include "tessera/models/pickle_state.h"
#include "tessera/models/zip_archive.h"

namespace models = tessera::models;

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
  try {
    if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
      for (const auto& e : models::zip::read_directory(data, size, "fuzz"))
        if (e.data_offset > size || e.size > size - e.data_offset) std::abort();
      return 0;
    }
    const auto tree = models::pickle::parse(data, size, "fuzz");
    const auto sel = models::pickle::select_tensors(tree, "", true, "fuzz");
    for (const auto& nt : sel.tensors) {
      const auto& t = tree.tensors.at(nt.tensor);
      models::pickle::check_extent(tree, t, "fuzz");
      // What the loader relies on once the extent is accepted.
      if (t.sizes.size() != t.strides.size() || t.storage >= tree.storages.size()) std::abort();
    }
  } catch (const models::FormatError&) {
  }
  return 0;
}
