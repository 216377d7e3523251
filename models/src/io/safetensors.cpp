#include "tessera/models/safetensors.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "tessera/io/atomic_file.h"

namespace tessera::models::safetensors {
namespace {

namespace fs = std::filesystem;

// Tensor bytes are copied as they are: the file's little-endian order must be the host's.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian");

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw FormatError(os.str());
}

uint64_t size_of(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) fail(path, ": no such file (or not a regular file)");
  const auto n = fs::file_size(path, ec);
  if (ec) fail(path, ": cannot stat (", ec.message(), ")");
  return n;
}

void read_exact(std::ifstream& in, uint64_t offset, char* dst, uint64_t n, const std::string& path) {
  in.clear();
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(dst, static_cast<std::streamsize>(n));
  if (!in || static_cast<uint64_t>(in.gcount()) != n)
    fail(path, ": short read of ", n, " bytes at offset ", offset, " (file changed or unreadable)");
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<std::string> shards_of_index(const std::string& index_path) {
  std::ifstream in(index_path);
  if (!in) fail(index_path, ": cannot open");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    fail(index_path, ": index is not valid JSON (", e.what(), ")");
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    fail(index_path, ": index has no \"weight_map\" object");
  const fs::path dir = fs::path(index_path).parent_path();
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& item : j["weight_map"].items()) {
    if (!item.value().is_string()) fail(index_path, ": weight_map entry for '", item.key(), "' is not a file name");
    const std::string file = item.value().get<std::string>();
    if (seen.insert(file).second) out.push_back((dir / file).string());
  }
  return out;
}

torch::ScalarType to_scalar_type(DType t, const std::string& where) {
  switch (t) {
    case DType::BOOL: return torch::kBool;
    case DType::U8: return torch::kByte;
    case DType::I8: return torch::kChar;
    case DType::I16: return torch::kShort;
    case DType::F16: return torch::kHalf;
    case DType::BF16: return torch::kBFloat16;
    case DType::I32: return torch::kInt;
    case DType::F32: return torch::kFloat;
    case DType::F64: return torch::kDouble;
    case DType::I64: return torch::kLong;
    default: fail(where, ": dtype ", dtype_name(t), " has no LibTorch equivalent here");
  }
}

DType from_scalar_type(torch::ScalarType t, const std::string& where) {
  switch (t) {
    case torch::kBool: return DType::BOOL;
    case torch::kByte: return DType::U8;
    case torch::kChar: return DType::I8;
    case torch::kShort: return DType::I16;
    case torch::kHalf: return DType::F16;
    case torch::kBFloat16: return DType::BF16;
    case torch::kInt: return DType::I32;
    case torch::kFloat: return DType::F32;
    case torch::kDouble: return DType::F64;
    case torch::kLong: return DType::I64;
    default: fail(where, ": cannot store dtype ", t, " in safetensors");
  }
}

File::File(std::string path) : path_(std::move(path)) {
  file_size_ = size_of(path_);
  std::ifstream in(path_, std::ios::binary);
  if (!in) fail(path_, ": cannot open");
  unsigned char first8[8] = {};
  if (file_size_ >= 8) read_exact(in, 0, reinterpret_cast<char*>(first8), 8, path_);
  const uint64_t n = parse_header_length(first8, file_size_, path_);  // bounded by file size and 100 MB
  std::string text(static_cast<std::size_t>(n), '\0');
  read_exact(in, 8, text.data(), n, path_);
  header_ = parse_header_json(text, n, file_size_ - 8 - n, path_);
}

std::vector<std::string> File::names() const {
  std::vector<std::string> out;
  for (const auto& t : header_.tensors) out.push_back(t.name);
  return out;
}

torch::Tensor File::tensor(const std::string& name) const {
  torch_ops::DeviceFiller on_host(torch::kCPU);
  return tensor(name, on_host);
}

torch::Tensor File::tensor(const std::string& name, torch_ops::DeviceFiller& via) const {
  const TensorEntry* e = header_.find(name);
  if (!e) fail(path_, ": no tensor named '", name, "'");
  const auto type = to_scalar_type(e->dtype, path_ + ": tensor '" + name + "'");
  auto t = torch::empty(e->shape, torch::TensorOptions().dtype(type).device(via.device()));
  if (e->end > e->begin) {
    std::ifstream in(path_, std::ios::binary);
    if (!in) fail(path_, ": cannot open");
    // Offsets were validated against the size at open; a file that shrank since is a short read.
    const uint64_t start = header_.data_start() + e->begin;
    via.fill(t, [&](uint64_t offset, void* dst, uint64_t n) { read_exact(in, start + offset, static_cast<char*>(dst), n, path_); });
  }
  return t;
}

StateDict load(const std::string& path, const torch::Device& device) {
  File f(path);
  torch_ops::DeviceFiller via(device);
  StateDict out;
  for (const auto& name : f.names()) out.emplace(name, f.tensor(name, via));
  return out;
}

StateDict load(const std::vector<std::string>& paths_in, const torch::Device& device) {
  std::vector<std::string> paths = paths_in;
  if (paths.size() == 1 && ends_with(paths[0], ".index.json")) paths = shards_of_index(paths[0]);
  StateDict out;
  std::map<std::string, std::string> owner;
  for (const auto& p : paths) {
    for (auto& [name, t] : load(p, device)) {
      const auto [it, fresh] = owner.emplace(name, p);
      if (!fresh) fail("tensor '", name, "' is in two shards: ", it->second, " and ", p);
      out.emplace(name, std::move(t));
    }
  }
  return out;
}

std::map<std::string, std::string> metadata(const std::string& path) { return File(path).header().metadata; }

void save(const std::string& path, const StateDict& tensors, const std::map<std::string, std::string>& meta) {
  nlohmann::json header = nlohmann::json::object();
  if (!meta.empty()) header["__metadata__"] = meta;
  std::vector<torch::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") fail(path, ": '__metadata__' cannot name a tensor");
    if (!t.defined()) fail(path, ": tensor '", name, "' is undefined");
    auto c = t.detach().to(torch::kCPU).contiguous();
    const DType dt = from_scalar_type(c.scalar_type(), path + ": tensor '" + name + "'");
    const uint64_t nbytes = static_cast<uint64_t>(c.numel()) * dtype_size(dt);
    header[name] = {{"dtype", dtype_name(dt)}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    data.push_back(std::move(c));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  tessera::io::write_atomically(path, [&](const std::string& tmp) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(tmp, ": cannot create");
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& c : data)
      out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
    out.flush();
    if (!out) fail(tmp, ": write failed (disk full?)");
  });
}

}  // namespace tessera::models::safetensors
