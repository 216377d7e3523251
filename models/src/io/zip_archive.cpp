#include "tessera/models/zip_archive.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <set>
#include <sstream>

namespace tessera::models::zip {
namespace {

template <typename... Args>
[[noreturn]] void fail(const std::string& source, Args&&... args) {
  fail_format(source, ": ", std::forward<Args>(args)...);
}

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50, kLocator64Sig = 0x07064b50;
constexpr uint64_t kLocalSize = 30, kCentralSize = 46, kEndSize = 22, kLocator64Size = 20, kEnd64Size = 56;
constexpr uint64_t kMaxComment = 0xffff;

// Little-endian fields of a record already in memory; `at` is checked by the caller.
uint64_t le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string shown(const std::string& s) {
  std::string out = "'";
  for (char c : s.substr(0, 80)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return out + (s.size() > 80 ? "...'" : "'");
}

struct Reader {
  const ReadAt& read;
  uint64_t size;
  const std::string& source;

  // Bytes [offset, offset + n) of the archive; `what` names the record for errors.
  std::vector<unsigned char> bytes(uint64_t offset, uint64_t n, const char* what) const {
    if (offset > size || n > size - offset)
      fail(source, "zip ", what, " at offset ", offset, " (", n, " bytes) runs past the end of the ", size,
           "-byte file (truncated?)");
    std::vector<unsigned char> out(static_cast<std::size_t>(n));
    if (n) read(offset, out.data(), n);
    return out;
  }
};

struct Directory {
  uint64_t entries = 0, offset = 0, size = 0;
};

// The end-of-central-directory record (after which only its comment may
// follow), and its zip64 counterpart when the 32-bit fields overflowed.
Directory find_directory(const Reader& r) {
  if (r.size < kEndSize) fail(r.source, "not a zip archive (", r.size, " bytes, shorter than an end record)");
  const uint64_t window = std::min<uint64_t>(r.size, kEndSize + kMaxComment);
  const auto tail = r.bytes(r.size - window, window, "end record");
  uint64_t pos = window - kEndSize + 1;
  do {
    --pos;
    const unsigned char* p = tail.data() + pos;
    if (le(p, 4) == kEndSig && pos + kEndSize + le(p + 20, 2) == window) break;
    if (pos == 0) fail(r.source, "not a zip archive (no end of central directory record; truncated?)");
  } while (true);
  const unsigned char* e = tail.data() + pos;
  const uint64_t end_at = r.size - window + pos;
  if (le(e + 4, 2) != 0 || le(e + 6, 2) != 0 || le(e + 8, 2) != le(e + 10, 2))
    fail(r.source, "multi-disk zip archives are not supported");
  Directory d{le(e + 10, 2), le(e + 16, 4), le(e + 12, 4)};
  const bool zip64 = d.entries == 0xffff || d.offset == 0xffffffff || d.size == 0xffffffff;
  if (!zip64) return d;
  if (end_at < kLocator64Size) fail(r.source, "zip64 archive without its locator (truncated?)");
  const auto loc = r.bytes(end_at - kLocator64Size, kLocator64Size, "zip64 locator");
  if (le(loc.data(), 4) != kLocator64Sig) fail(r.source, "zip64 archive without its locator record");
  const auto e64 = r.bytes(le(loc.data() + 8, 8), kEnd64Size, "zip64 end record");
  if (le(e64.data(), 4) != kEnd64Sig) fail(r.source, "zip64 end record has a bad signature");
  if (le(e64.data() + 24, 8) != le(e64.data() + 32, 8)) fail(r.source, "multi-disk zip archives are not supported");
  return {le(e64.data() + 32, 8), le(e64.data() + 48, 8), le(e64.data() + 40, 8)};
}

// Sizes and offset that a central entry's 32-bit fields could not hold
// (0xffffffff) are in its zip64 extra field, in this order.
void apply_zip64_extra(const unsigned char* extra, uint64_t n, uint64_t& usize, uint64_t& csize, uint64_t& local,
                       const std::string& where) {
  for (uint64_t pos = 0; pos + 4 <= n;) {
    const uint64_t id = le(extra + pos, 2), len = le(extra + pos + 2, 2);
    if (pos + 4 + len > n) fail(where, "extra field runs past its entry");
    if (id == 0x0001) {
      const unsigned char* f = extra + pos + 4;
      uint64_t used = 0;
      for (uint64_t* v : {&usize, &csize, &local}) {
        if (*v != 0xffffffff) continue;
        if (used + 8 > len) fail(where, "zip64 extra field is too short");
        *v = le(f + used, 8);
        used += 8;
      }
      return;
    }
    pos += 4 + len;
  }
  if (usize == 0xffffffff || csize == 0xffffffff || local == 0xffffffff)
    fail(where, "32-bit size or offset overflowed without a zip64 extra field");
}

}  // namespace

std::vector<Entry> read_directory(const ReadAt& read, uint64_t size, const std::string& source) {
  const Reader r{read, size, source};
  const Directory d = find_directory(r);
  if (d.offset > size || d.size > size - d.offset)
    fail(source, "zip central directory (offset ", d.offset, ", ", d.size, " bytes) runs past the end of the file");
  if (d.entries > d.size / kCentralSize)
    fail(source, "zip directory claims ", d.entries, " entries in ", d.size, " bytes");
  const auto dir = r.bytes(d.offset, d.size, "central directory");
  std::vector<Entry> out;
  std::set<std::string> names;
  uint64_t pos = 0;
  for (uint64_t i = 0; i < d.entries; ++i) {
    if (pos + kCentralSize > dir.size()) fail(source, "zip central directory entry ", i, " is cut short");
    const unsigned char* c = dir.data() + pos;
    if (le(c, 4) != kCentralSig) fail(source, "zip central directory entry ", i, " has a bad signature");
    const uint64_t flags = le(c + 8, 2), method = le(c + 10, 2);
    uint64_t csize = le(c + 20, 4), usize = le(c + 24, 4), local = le(c + 42, 4);
    const uint64_t name_len = le(c + 28, 2), extra_len = le(c + 30, 2), comment_len = le(c + 32, 2);
    if (pos + kCentralSize + name_len + extra_len + comment_len > dir.size())
      fail(source, "zip central directory entry ", i, " runs past the directory");
    Entry e;
    e.name.assign(reinterpret_cast<const char*>(c + kCentralSize), static_cast<std::size_t>(name_len));
    e.crc32 = static_cast<uint32_t>(le(c + 16, 4));
    const std::string where = source + ": zip entry " + shown(e.name);
    apply_zip64_extra(c + kCentralSize + name_len, extra_len, usize, csize, local, where);
    if (flags & 0x1) fail(where, "is encrypted");
    if (method == 0 && csize != usize) fail(where, "stored entry with compressed size ", csize, " != size ", usize);
    if (!names.insert(e.name).second) fail(where, "appears twice");
    // The data starts after the local header, whose name and extra lengths may
    // differ from the central copy (PyTorch pads the extra field to align data).
    const auto lh = r.bytes(local, kLocalSize, "local header");
    if (le(lh.data(), 4) != kLocalSig) fail(where, "local header has a bad signature");
    const uint64_t lname = le(lh.data() + 26, 2), lextra = le(lh.data() + 28, 2);
    const auto lname_bytes = r.bytes(local + kLocalSize, lname, "local header name");
    if (std::string(lname_bytes.begin(), lname_bytes.end()) != e.name) fail(where, "local header names another file");
    e.data_offset = local + kLocalSize + lname + lextra;
    e.size = csize;
    e.method = static_cast<uint16_t>(method);
    if (e.data_offset > size || e.size > size - e.data_offset)
      fail(where, "runs past the end of the ", size, "-byte file (", e.size, " bytes at offset ", e.data_offset,
           "; truncated?)");
    if (e.data_offset + e.size > d.offset && e.data_offset < d.offset + d.size)
      fail(where, "overlaps the central directory");
    out.push_back(std::move(e));
    pos += kCentralSize + name_len + extra_len + comment_len;
  }
  return out;
}

std::vector<Entry> read_directory(const unsigned char* bytes, std::size_t size, const std::string& source) {
  const ReadAt read = [bytes](uint64_t offset, void* dst, uint64_t n) {
    std::memcpy(dst, bytes + offset, static_cast<std::size_t>(n));
  };
  return read_directory(read, size, source);
}

bool looks_like_zip(const unsigned char* first, std::size_t n) {
  return n >= 4 && first[0] == 'P' && first[1] == 'K' &&
         ((first[2] == 3 && first[3] == 4) || (first[2] == 5 && first[3] == 6));
}

uint32_t crc32(const void* data, std::size_t n, uint32_t crc) {
  // Slicing-by-8 tables: ~8x the byte-wise loop, so checking a multi-GB checkpoint costs about a disk read.
  static const auto tables = [] {
    std::array<std::array<uint32_t, 256>, 8> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (int s = 1; s < 8; ++s)
      for (uint32_t i = 0; i < 256; ++i) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
    return t;
  }();
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    const uint32_t lo = crc ^ static_cast<uint32_t>(le(p, 4)), hi = static_cast<uint32_t>(le(p + 4, 4));
    crc = tables[7][lo & 0xff] ^ tables[6][(lo >> 8) & 0xff] ^ tables[5][(lo >> 16) & 0xff] ^ tables[4][lo >> 24] ^
          tables[3][hi & 0xff] ^ tables[2][(hi >> 8) & 0xff] ^ tables[1][(hi >> 16) & 0xff] ^ tables[0][hi >> 24];
  }
  for (; n; --n, ++p) crc = tables[0][(crc ^ *p) & 0xff] ^ (crc >> 8);
  return ~crc;
}

}  // namespace tessera::models::zip
