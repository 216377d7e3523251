// Warnings from the io layer: through spdlog when the build has it,
// otherwise one line on stderr.
#pragma once

#include <string>

namespace tessera::io::detail {

void warn(const std::string& message);

}  // namespace tessera::io::detail
