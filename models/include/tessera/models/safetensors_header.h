// The safetensors header: an 8-byte little-endian length N, then N bytes of
// JSON mapping each tensor name to {dtype, shape, data_offsets} (plus an
// optional "__metadata__" string map), then the data bytes. Everything here is
// checked against the file size before a single data byte is touched, so a
// malformed or truncated file is an error message, never an out-of-range read.
// No LibTorch here: the fuzz target builds this file alone.
//
// Spec: https://github.com/huggingface/safetensors (README, "Format").
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/models/format_error.h"

namespace tessera::models::safetensors {

// Every malformed-file error; what() is one line that names the file.
using tessera::models::FormatError;

// The spec's dtypes. Sub-byte ones (F4, F6) are not listed and are rejected.
enum class DType { BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64 };

const char* dtype_name(DType t);
std::size_t dtype_size(DType t);
// Throws FormatError (mentioning `where`) for names outside the spec.
DType dtype_from_name(std::string_view name, const std::string& where);

struct TensorEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets relative to the start of the data section
  uint64_t end = 0;
  uint64_t numel() const;
};

struct Header {
  uint64_t json_size = 0;              // N
  uint64_t data_start() const { return 8 + json_size; }
  std::vector<TensorEntry> tensors;    // sorted by begin offset
  std::map<std::string, std::string> metadata;
  const TensorEntry* find(const std::string& name) const;
};

// The Rust implementation's limit; also bounds what a reader allocates for the JSON.
constexpr uint64_t kMaxHeaderSize = 100'000'000;

// N from the first 8 bytes, checked against the file size and kMaxHeaderSize.
uint64_t parse_header_length(const unsigned char first8[8], uint64_t file_size, const std::string& source);

// Parses N bytes of header JSON and validates every entry against the data
// section size (file size - 8 - N): known dtype, non-negative shape, byte
// count = numel * dtype size, offsets inside the data, no overlaps or gaps,
// the data fully covered (the spec forbids holes), no duplicate names.
Header parse_header_json(std::string_view json, uint64_t json_size, uint64_t data_size, const std::string& source);

// A whole file already in memory (the fuzzer's entry point, and small files).
Header parse_header(const unsigned char* bytes, std::size_t size, const std::string& source);

}  // namespace tessera::models::safetensors
