// The one exception type for a malformed or refused weights file (safetensors,
// PyTorch zip, pickle): what() is one line that names the file and the problem.
#pragma once

#include <sstream>
#include <stdexcept>

namespace tessera::models {

struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws a FormatError whose message is the arguments streamed one after another.
template <typename... Args>
[[noreturn]] void fail_format(Args&&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw FormatError(os.str());
}

}  // namespace tessera::models
