#include "log.h"

#if TESSERA_IO_SPDLOG
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#else
#include <iostream>
#endif

namespace tessera::io::detail {

void warn(const std::string& message) {
#if TESSERA_IO_SPDLOG
  // Our own logger on stderr: spdlog's default one writes to stdout, where
  // it would corrupt `tessera info --json` and other machine-read output.
  static const std::shared_ptr<spdlog::logger> logger = [] {
    auto existing = spdlog::get("tessera.io");
    return existing ? existing : spdlog::stderr_color_mt("tessera.io");
  }();
  logger->warn("{}", message);
#else
  std::cerr << "warning: " << message << "\n";
#endif
}

}  // namespace tessera::io::detail
