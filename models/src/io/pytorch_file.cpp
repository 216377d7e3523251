#include "pytorch_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tessera/models/pickle_state.h"

namespace tessera::models::pytorch {
namespace {

namespace fs = std::filesystem;

// data.pkl holds names and shapes only (~100 bytes a tensor): this is far above any real one.
constexpr uint64_t kMaxPickleBytes = uint64_t{512} << 20;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// An open archive: its entries by name and bounds-checked, CRC-checked reads.
class Archive {
 public:
  explicit Archive(const std::string& path) : path_(path), in_(path, std::ios::binary) {
    std::error_code ec;
    size_ = fs::file_size(path, ec);
    if (!in_ || ec) fail_format(path, ": cannot open");
    entries_ = zip::read_directory([this](uint64_t off, void* dst, uint64_t n) { read(off, dst, n); }, size_, path);
    for (const auto& e : entries_) by_name_[e.name] = &e;
  }
  const std::vector<zip::Entry>& entries() const { return entries_; }
  const zip::Entry* find(const std::string& name) const {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
  }
  void read_entry(const zip::Entry& e, void* dst) {
    check_stored(e);
    read(e.data_offset, dst, e.size);
    check_crc(e, zip::crc32(dst, static_cast<std::size_t>(e.size)));
  }
  // Into `dst` (e.size bytes, on via's device), checked as it passes through the host.
  void read_entry(const zip::Entry& e, const torch::Tensor& dst, torch_ops::DeviceFiller& via) {
    check_stored(e);
    uint32_t crc = 0;
    via.fill(dst, [&](uint64_t offset, void* p, uint64_t n) { read(e.data_offset + offset, p, n); },
             [&](const void* p, uint64_t n) { crc = zip::crc32(p, static_cast<std::size_t>(n), crc); });
    check_crc(e, crc);
  }
  std::string read_text(const zip::Entry& e, uint64_t max) {
    if (e.size > max) fail_format(path_, ": ", e.name, " is ", e.size, " bytes, over the ", max, " this reader accepts");
    std::string s(static_cast<std::size_t>(e.size), '\0');
    read_entry(e, s.data());
    return s;
  }

 private:
  void check_stored(const zip::Entry& e) const {
    if (e.method != 0)
      fail_format(path_, ": zip entry '", e.name, "' is compressed (method ", e.method,
           "); torch.save writes stored entries: was the archive re-zipped?");
  }
  void check_crc(const zip::Entry& e, uint32_t crc) const {
    if (crc != e.crc32)
      fail_format(path_, ": zip entry '", e.name, "' fails its CRC-32 check (corrupt or truncated download?)");
  }
  void read(uint64_t offset, void* dst, uint64_t n) {
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    if (!in_ || static_cast<uint64_t>(in_.gcount()) != n)
      fail_format(path_, ": short read of ", n, " bytes at offset ", offset, " (file changed or unreadable)");
  }

  std::string path_;
  std::ifstream in_;
  uint64_t size_ = 0;
  std::vector<zip::Entry> entries_;
  std::map<std::string, const zip::Entry*> by_name_;
};

// "archive/" from "archive/data.pkl": torch.save puts every record under one folder.
std::string record_folder(const Archive& a, const std::string& path) {
  std::string folder;
  for (const auto& e : a.entries()) {
    const auto slash = e.name.find('/');
    if (slash == std::string::npos || e.name.compare(slash, std::string::npos, "/data.pkl") != 0) continue;
    if (!folder.empty()) fail_format(path, ": zip holds two checkpoints (", folder, "data.pkl and ", e.name, ")");
    folder = e.name.substr(0, slash + 1);
  }
  if (folder.empty()) fail_format(path, ": zip archive without <name>/data.pkl: not a PyTorch checkpoint");
  return folder;
}

void check_version(Archive& a, const std::string& folder, const std::string& path) {
  for (const char* name : {"version", ".format_version"}) {
    const zip::Entry* e = a.find(folder + name);
    if (!e) continue;
    std::string v = a.read_text(*e, 64);
    while (!v.empty() && (v.back() == '\n' || v.back() == '\r' || v.back() == ' ')) v.pop_back();
    if (v.empty() || v.size() > 6 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
      fail_format(path, ": ", e->name, " is not a version number");
    // Readers in torch 2.x accept versions up to 10; anything newer changed the layout.
    if (std::stoi(v) < 1 || std::stoi(v) > 10) fail_format(path, ": ", e->name, " ", v, " is not a format this reader knows (1-10)");
  }
}

// True when the storages were written big-endian (and so must be swapped here).
bool big_endian(Archive& a, const std::string& folder, const std::string& path) {
  const zip::Entry* e = a.find(folder + "byteorder");
  if (!e) return false;  // written before torch 1.13 on a little-endian machine
  const std::string order = a.read_text(*e, 16);
  if (order == "little") return false;
  if (order == "big") return true;
  fail_format(path, ": ", e->name, " says '", order.substr(0, 16), "', not 'little' or 'big'");
}

void swap_bytes(torch::Tensor& t) {
  const auto width = static_cast<std::size_t>(t.element_size());
  auto* p = static_cast<unsigned char*>(t.data_ptr());
  for (int64_t i = 0; i < t.numel() && width > 1; ++i, p += width) std::reverse(p, p + width);
}

// One storage record as a 1-D tensor of its dtype on via's device, checked against the numel the pickle declared.
torch::Tensor read_storage(Archive& a, const std::string& folder, const pickle::Storage& s, bool swap,
                           const std::string& path, torch_ops::DeviceFiller& via) {
  const zip::Entry* e = a.find(folder + "data/" + s.key);
  if (!e) fail_format(path, ": storage '", s.key, "' has no record ", folder, "data/", s.key);
  const uint64_t width = safetensors::dtype_size(s.dtype);
  if (s.numel > e->size / width || s.numel * width != e->size)
    fail_format(path, ": storage '", s.key, "' holds ", e->size, " bytes, but the pickle says ", s.numel, " elements of ",
         safetensors::dtype_name(s.dtype), " (", s.numel, " x ", width, " bytes)");
  const auto type = torch::TensorOptions().dtype(safetensors::to_scalar_type(s.dtype, path));
  if (swap) {  // swapped on the host
    auto t = torch::empty({static_cast<int64_t>(s.numel)}, type);
    a.read_entry(*e, t.data_ptr());
    swap_bytes(t);
    return t.to(via.device());
  }
  auto t = torch::empty({static_cast<int64_t>(s.numel)}, type.device(via.device()));
  a.read_entry(*e, t, via);
  return t;
}

}  // namespace

bool is_torchscript(const std::vector<zip::Entry>& entries) {
  return std::any_of(entries.begin(), entries.end(), [](const zip::Entry& e) {
    return ends_with(e.name, "/constants.pkl") || e.name.find("/code/") != std::string::npos;
  });
}

std::vector<zip::Entry> read_entries(const std::string& path) { return Archive(path).entries(); }

StateDict load(const std::string& path, const CheckpointOptions& options, CheckpointReport* report) {
  Archive a(path);
  if (is_torchscript(a.entries()))
    fail_format(path, ": a TorchScript archive (torch.jit.save), not a torch.save checkpoint; in Python: "
               "torch.save(torch.jit.load('", path, "').state_dict(), 'weights.pt')");
  const std::string folder = record_folder(a, path);
  check_version(a, folder, path);
  const bool swap = big_endian(a, folder, path);
  const std::string pkl = a.read_text(*a.find(folder + "data.pkl"), kMaxPickleBytes);
  const std::string source = path + ": data.pkl";
  const pickle::Tree tree = pickle::parse(reinterpret_cast<const unsigned char*>(pkl.data()), pkl.size(), source);
  const pickle::Selection sel = pickle::select_tensors(tree, options.key, options.unwrap, source);

  // Views of one storage are cut from one read of it; each result owns its elements.
  std::map<std::string, std::vector<const pickle::NamedTensor*>> by_storage;
  for (const auto& nt : sel.tensors) {
    pickle::check_extent(tree, tree.tensors[nt.tensor], source + ": tensor '" + nt.name + "'");
    by_storage[tree.storages[tree.tensors[nt.tensor].storage].key].push_back(&nt);
  }
  StateDict out;
  torch_ops::DeviceFiller via(options.device);
  for (const auto& [key, users] : by_storage) {
    const pickle::Storage& s = tree.storages[tree.tensors[users.front()->tensor].storage];
    for (const auto* nt : users) {
      const pickle::Storage& other = tree.storages[tree.tensors[nt->tensor].storage];
      if (other.dtype != s.dtype || other.numel != s.numel)
        fail_format(source, ": storage '", key, "' is declared twice with different types or sizes");
    }
    const torch::Tensor storage = read_storage(a, folder, s, swap, path, via);
    for (const auto* nt : users) {
      const pickle::Tensor& t = tree.tensors[nt->tensor];
      torch::Tensor v = storage.as_strided(t.sizes, t.strides, static_cast<int64_t>(t.offset));
      out.emplace(nt->name, v.clone(at::MemoryFormat::Contiguous));
    }
  }
  if (report) {
    report->format = CheckpointFormat::kPyTorchZip;
    report->files.push_back(path);
    report->key = sel.key;
    report->key_from_unwrap = sel.from_unwrap;
    report->skipped.insert(report->skipped.end(), sel.skipped.begin(), sel.skipped.end());
  }
  return out;
}

}  // namespace tessera::models::pytorch
