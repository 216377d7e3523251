#include "tessera/models/safetensors_header.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <sstream>

namespace tessera::models::safetensors {
namespace {

using nlohmann::json;

template <typename... Args>
[[noreturn]] void fail(const std::string& source, Args&&... args) {
  std::ostringstream os;
  os << source << ": ";
  (os << ... << args);
  throw FormatError(os.str());
}

struct DTypeInfo {
  DType type;
  const char* name;
  std::size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::BOOL, "BOOL", 1}, {DType::U8, "U8", 1},     {DType::I8, "I8", 1},     {DType::F8_E5M2, "F8_E5M2", 1},
    {DType::F8_E4M3, "F8_E4M3", 1}, {DType::I16, "I16", 2}, {DType::U16, "U16", 2}, {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2}, {DType::I32, "I32", 4},   {DType::U32, "U32", 4},   {DType::F32, "F32", 4},
    {DType::F64, "F64", 8},   {DType::I64, "I64", 8},   {DType::U64, "U64", 8}};

const DTypeInfo& info(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d;
  throw std::logic_error("safetensors: unknown DType enumerator");
}

// Short, printable excerpt of a name taken from an untrusted file.
std::string shown(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 80)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  if (s.size() > 80) out += "...";
  return out + "'";
}

uint64_t as_u64(const json& v, const std::string& source, const std::string& what) {
  if (!v.is_number_unsigned()) fail(source, what, " must be a non-negative integer, got ", v.dump());
  return v.get<uint64_t>();
}

TensorEntry parse_entry(const std::string& name, const json& v, const std::string& source) {
  const std::string where = "tensor " + shown(name);
  if (!v.is_object()) fail(source, where, ": entry must be an object, got ", v.type_name());
  for (const auto& item : v.items())
    if (item.key() != "dtype" && item.key() != "shape" && item.key() != "data_offsets")
      fail(source, where, ": unknown field ", shown(item.key()));
  const auto dt = v.find("dtype");
  const auto sh = v.find("shape");
  const auto off = v.find("data_offsets");
  if (dt == v.end() || sh == v.end() || off == v.end())
    fail(source, where, ": entry needs dtype, shape and data_offsets");
  if (!dt->is_string()) fail(source, where, ": dtype must be a string");
  TensorEntry e;
  e.name = name;
  e.dtype = dtype_from_name(dt->get_ref<const std::string&>(), source + ": " + where);
  if (!sh->is_array()) fail(source, where, ": shape must be an array");
  uint64_t numel = 1;
  for (const auto& d : *sh) {
    const uint64_t n = as_u64(d, source, where + " shape entry");
    if (n > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, n, &numel))
      fail(source, where, ": shape ", sh->dump(), " overflows");
    e.shape.push_back(static_cast<int64_t>(n));
  }
  if (!off->is_array() || off->size() != 2) fail(source, where, ": data_offsets must be [begin, end]");
  e.begin = as_u64((*off)[0], source, where + " data_offsets[0]");
  e.end = as_u64((*off)[1], source, where + " data_offsets[1]");
  if (e.end < e.begin) fail(source, where, ": data_offsets [", e.begin, ", ", e.end, "] end before begin");
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(e.dtype)), &nbytes))
    fail(source, where, ": shape ", sh->dump(), " overflows");
  if (e.end - e.begin != nbytes)
    fail(source, where, ": ", dtype_name(e.dtype), " shape ", sh->dump(), " needs ", nbytes, " bytes but data_offsets [",
         e.begin, ", ", e.end, "] hold ", e.end - e.begin);
  return e;
}

}  // namespace

const char* dtype_name(DType t) { return info(t).name; }
std::size_t dtype_size(DType t) { return info(t).size; }

DType dtype_from_name(std::string_view name, const std::string& where) {
  for (const auto& d : kDTypes)
    if (name == d.name) return d.type;
  fail(where, "unsupported dtype ", shown(name));
}

uint64_t TensorEntry::numel() const {
  uint64_t n = 1;
  for (auto d : shape) n *= static_cast<uint64_t>(d);  // validated not to overflow
  return n;
}

const TensorEntry* Header::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

uint64_t parse_header_length(const unsigned char first8[8], uint64_t file_size, const std::string& source) {
  if (file_size < 8) fail(source, "not a safetensors file: ", file_size, " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | first8[i];  // little-endian whatever the host
  if (n == 0) fail(source, "header length is 0");
  if (n > kMaxHeaderSize) fail(source, "header length ", n, " exceeds the ", kMaxHeaderSize, "-byte limit (not a safetensors file?)");
  if (n > file_size - 8) fail(source, "header length ", n, " runs past the end of the ", file_size, "-byte file (truncated?)");
  return n;
}

Header parse_header_json(std::string_view text, uint64_t json_size, uint64_t data_size, const std::string& source) {
  // The callback rejects duplicate keys (nlohmann would keep the last one
  // silently) and nesting deeper than a valid header ever needs, so a hostile
  // header cannot make the DOM deep.
  std::vector<std::set<std::string>> open_objects;
  int depth = 0;
  auto callback = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        open_objects.emplace_back();
        [[fallthrough]];
      case json::parse_event_t::array_start:
        if (++depth > 3) fail(source, "header JSON nests deeper than a safetensors header can");
        break;
      case json::parse_event_t::object_end:
        open_objects.pop_back();
        [[fallthrough]];
      case json::parse_event_t::array_end:
        --depth;
        break;
      case json::parse_event_t::key:
        if (!open_objects.empty() && !open_objects.back().insert(parsed.get<std::string>()).second)
          fail(source, "duplicate key ", shown(parsed.get<std::string>()), " in header JSON");
        break;
      default:
        break;
    }
    return true;
  };
  json root;
  try {
    root = json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    fail(source, "header is not valid JSON (", e.what(), ")");
  }
  if (!root.is_object()) fail(source, "header JSON must be an object, got ", root.type_name());

  Header h;
  h.json_size = json_size;
  for (const auto& item : root.items()) {
    if (item.key() == "__metadata__") {
      if (!item.value().is_object()) fail(source, "__metadata__ must be an object of strings");
      for (const auto& m : item.value().items()) {
        if (!m.value().is_string()) fail(source, "__metadata__ value of ", shown(m.key()), " is not a string");
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    h.tensors.push_back(parse_entry(item.key(), item.value(), source));
  }

  // The data section must be covered exactly: sorted by offset, each tensor
  // starts where the previous ended, the last ends at the end of the file.
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const TensorEntry* prev = nullptr;
  for (const auto& t : h.tensors) {
    if (t.end > data_size)
      fail(source, "tensor ", shown(t.name), " data_offsets [", t.begin, ", ", t.end, "] run past the ", data_size,
           "-byte data section (truncated?)");
    if (t.begin < covered)
      fail(source, "tensors ", shown(prev->name), " and ", shown(t.name), " overlap (", t.begin, " < ", covered, ")");
    if (t.begin > covered)
      fail(source, "bytes [", covered, ", ", t.begin, ") of the data section belong to no tensor");
    covered = t.end;
    prev = &t;
  }
  if (covered != data_size)
    fail(source, "the data section has ", data_size, " bytes but the tensors cover ", covered);
  return h;
}

Header parse_header(const unsigned char* bytes, std::size_t size, const std::string& source) {
  if (size < 8) fail(source, "not a safetensors file: ", size, " bytes, shorter than the 8-byte header length");
  const uint64_t n = parse_header_length(bytes, size, source);
  const std::string_view text(reinterpret_cast<const char*>(bytes) + 8, static_cast<std::size_t>(n));
  return parse_header_json(text, n, size - 8 - n, source);
}

}  // namespace tessera::models::safetensors
