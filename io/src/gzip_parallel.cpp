#include "gzip_parallel.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "parallel_for.h"

namespace tessera::io::detail {
namespace {

constexpr size_t kBlock = size_t{1} << 20;  // per-thread unit: large enough that the 32 KiB priming costs little
constexpr size_t kWindow = 32768;

struct Block {
  std::vector<unsigned char> out;
  uLong crc = 0;
  size_t len = 0;
};

// Raw deflate of data[begin, end), primed with the 32 KiB before it; the last block finishes the stream.
void deflate_block(const unsigned char* data, size_t begin, size_t end, bool last, int level, Block& b) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("gzip: cannot initialise zlib");
  if (begin > 0) {
    const size_t dict = std::min(begin, kWindow);
    deflateSetDictionary(&z, data + begin - dict, static_cast<uInt>(dict));
  }
  b.len = end - begin;
  b.crc = crc32(crc32(0L, Z_NULL, 0), data + begin, static_cast<uInt>(b.len));
  b.out.resize(deflateBound(&z, static_cast<uLong>(b.len)) + 16);
  z.next_in = const_cast<unsigned char*>(data + begin);
  z.avail_in = static_cast<uInt>(b.len);
  z.next_out = b.out.data();
  z.avail_out = static_cast<uInt>(b.out.size());
  // A sync flush ends a middle block on a byte boundary so that the next one's bits can follow it.
  const int r = deflate(&z, last ? Z_FINISH : Z_SYNC_FLUSH);
  const bool ok = last ? r == Z_STREAM_END : r == Z_OK && z.avail_in == 0 && z.avail_out > 0;
  b.out.resize(b.out.size() - z.avail_out);
  deflateEnd(&z);
  if (!ok) throw std::runtime_error("gzip: zlib failed to deflate a block");
}

std::vector<unsigned char> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw std::runtime_error(path + ": cannot open for compression");
  std::vector<unsigned char> data(static_cast<size_t>(f.tellg()));
  f.seekg(0);
  if (!f.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data.size())))
    throw std::runtime_error(path + ": cannot read for compression");
  return data;
}

void put_le32(std::FILE* f, uLong v) {
  const unsigned char b[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                              static_cast<unsigned char>(v >> 16), static_cast<unsigned char>(v >> 24)};
  std::fwrite(b, 1, 4, f);
}

}  // namespace

void gzip_file_parallel(const std::string& in, const std::string& out, int level) {
  const std::vector<unsigned char> data = read_all(in);
  const size_t n = std::max<size_t>(1, (data.size() + kBlock - 1) / kBlock);
  std::vector<Block> blocks(n);
  parallel_for(n, io_threads(), [&](size_t i) {
    deflate_block(data.data(), i * kBlock, std::min(data.size(), (i + 1) * kBlock), i + 1 == n, level, blocks[i]);
  });

  std::FILE* f = std::fopen(out.c_str(), "wb");
  if (!f) throw std::runtime_error(out + ": cannot create: " + std::strerror(errno));
  // RFC 1952 header: deflate, no name, no time, OS unknown.
  const unsigned char header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255};
  std::fwrite(header, 1, sizeof header, f);
  uLong crc = crc32(0L, Z_NULL, 0);
  for (const Block& b : blocks) {
    std::fwrite(b.out.data(), 1, b.out.size(), f);
    crc = crc32_combine(crc, b.crc, static_cast<z_off_t>(b.len));
  }
  put_le32(f, crc);
  put_le32(f, static_cast<uLong>(data.size() & 0xffffffffu));
  const bool failed = std::ferror(f) != 0;
  if (std::fclose(f) != 0 || failed) throw std::runtime_error(out + ": write failed: " + std::strerror(errno));
}

}  // namespace tessera::io::detail
