// The zip container of PyTorch checkpoints (torch.save since 1.6): the
// central directory is parsed here rather than through libzip/minizip because
// PyTorch writes only stored (uncompressed) entries, the whole job is ~200
// bounds-checked lines, and the fuzz target and the GPU machine need no extra
// library. Zip64 records are understood; encrypted entries are refused and
// compressed ones listed (with method != 0: readers refuse them). Every offset
// is checked against the archive's size before a byte is read. No LibTorch.
//
// Spec: PKWARE APPNOTE.TXT 6.3 (sections 4.3.7 local header, 4.3.12 central
// directory, 4.3.14-16 zip64 and end of central directory, 4.5.3 zip64 extra).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/models/format_error.h"

namespace tessera::models::zip {

struct Entry {
  std::string name;
  uint64_t data_offset = 0;  // of the first data byte, from the local header (honours any alignment padding)
  uint64_t size = 0;         // bytes in the archive (for a stored entry, also its size)
  uint32_t crc32 = 0;
  uint16_t method = 0;       // 0: stored; anything else is compressed
};

// Reads `n` bytes at `offset` into `dst`; the archive checks bounds before calling.
using ReadAt = std::function<void(uint64_t offset, void* dst, uint64_t n)>;

// The entries of an archive of `size` bytes, in central-directory order.
// Throws FormatError naming `source` for anything that is not a well-formed
// archive (truncated, overlapping, encrypted, duplicate names, multi-disk).
std::vector<Entry> read_directory(const ReadAt& read, uint64_t size, const std::string& source);

// The same over bytes already in memory (the fuzzer's entry point).
std::vector<Entry> read_directory(const unsigned char* bytes, std::size_t size, const std::string& source);

// True when the first bytes are a local file header ("PK\3\4") or an empty
// archive's end record ("PK\5\6").
bool looks_like_zip(const unsigned char* first, std::size_t n);

// CRC-32 (IEEE, as zip uses), continued from `crc` (0 to start).
uint32_t crc32(const void* data, std::size_t n, uint32_t crc = 0);

}  // namespace tessera::models::zip
