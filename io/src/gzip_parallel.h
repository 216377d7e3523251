// gzip by several threads, as pigz does: the input is cut into blocks deflated
// independently (each primed with the previous block's last 32 KiB), joined
// into one standard gzip member whose CRC is combined from the blocks'.
#pragma once
#include <string>

namespace tessera::io::detail {

// Compresses the file `in` into the gzip file `out` (overwritten) at zlib `level`.
void gzip_file_parallel(const std::string& in, const std::string& out, int level = 6);

}  // namespace tessera::io::detail
