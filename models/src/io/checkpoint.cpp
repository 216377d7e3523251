#include "tessera/models/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "pytorch_file.h"

namespace tessera::models {
namespace {

namespace fs = std::filesystem;

// Prefixes that wrapping a model adds to every key (DDP, Lightning, open_clip, DINOv2 hubs, encoder-only exports).
constexpr const char* kPrefixes[] = {"module.", "model.", "timm_model.", "trunk.", "encoder."};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Legacy torch.save (< 1.6) begins with PROTO 2 and a LONG1 magic number; any other pickle is legacy for us too.
bool is_pickle(const unsigned char* b, std::size_t n) { return n >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5; }

bool is_safetensors(const unsigned char* b, std::size_t n, uint64_t file_size) {
  if (n < 9) return false;
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | b[i];
  return len >= 2 && len <= file_size - 8 && b[8] == '{';
}

[[noreturn]] void refuse(CheckpointFormat f, const std::string& path) {
  if (f == CheckpointFormat::kPyTorchLegacy)
    fail_format(path, ": a legacy (torch < 1.6) pickle checkpoint, which Tessera does not read (loading it runs its "
               "pickle code); if you trust it, convert it once in Python: python -c \"import torch; "
               "torch.save(torch.load('", path, "'), 'new.pt')\", then load new.pt (or tessera convert new.pt -o "
               "weights.safetensors)");
  if (f == CheckpointFormat::kTorchScript)
    fail_format(path, ": a TorchScript archive (torch.jit.save), not a torch.save checkpoint; in Python: "
               "torch.save(torch.jit.load('", path, "').state_dict(), 'weights.pt')");
  fail_format(path, ": not a checkpoint Tessera reads (safetensors, a safetensors index, or a PyTorch zip from torch.save)");
}

// The safetensors entries under `key.` with it removed (safetensors files are flat: a key is a prefix).
StateDict take_key(StateDict all, const std::string& key, const std::string& where) {
  StateDict out;
  const std::string prefix = key + ".";
  for (auto& [name, t] : all)
    if (name.compare(0, prefix.size(), prefix) == 0) out.emplace(name.substr(prefix.size()), std::move(t));
  if (out.empty()) fail_format(where, ": no tensor name starts with '", prefix, "'");
  return out;
}

void merge(StateDict& into, StateDict part, std::map<std::string, std::string>& owner, const std::string& path) {
  for (auto& [name, t] : part) {
    const auto [it, fresh] = owner.emplace(name, path);
    if (!fresh) fail_format("tensor '", name, "' is in two shards: ", it->second, " and ", path);
    into.emplace(name, std::move(t));
  }
}

}  // namespace

const char* checkpoint_format_name(CheckpointFormat f) {
  switch (f) {
    case CheckpointFormat::kSafetensors: return "safetensors";
    case CheckpointFormat::kSafetensorsIndex: return "safetensors-index";
    case CheckpointFormat::kPyTorchZip: return "pytorch-zip";
    case CheckpointFormat::kPyTorchLegacy: return "pytorch-legacy";
    case CheckpointFormat::kTorchScript: return "torchscript";
    case CheckpointFormat::kUnknown: break;
  }
  return "unknown";
}

CheckpointFormat detect_checkpoint_format(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) fail_format(path, ": no such file (or not a regular file)");
  const uint64_t size = fs::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  if (!in || ec) fail_format(path, ": cannot open");
  unsigned char b[16] = {};
  in.read(reinterpret_cast<char*>(b), sizeof b);
  const auto n = static_cast<std::size_t>(in.gcount());
  if (is_safetensors(b, n, size)) return CheckpointFormat::kSafetensors;  // first: its length bytes may look like anything
  if (zip::looks_like_zip(b, n)) {
    try {
      return pytorch::is_torchscript(pytorch::read_entries(path)) ? CheckpointFormat::kTorchScript
                                                                   : CheckpointFormat::kPyTorchZip;
    } catch (const FormatError&) {
      return CheckpointFormat::kPyTorchZip;  // a broken zip: loading it says what is wrong
    }
  }
  if (is_pickle(b, n)) return CheckpointFormat::kPyTorchLegacy;
  std::size_t i = 0;
  while (i < n && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t')) ++i;
  if ((i < n && b[i] == '{') || ends_with(path, ".index.json")) return CheckpointFormat::kSafetensorsIndex;
  return CheckpointFormat::kUnknown;
}

std::string common_prefix(const StateDict& state) {
  std::string stripped;
  for (bool again = !state.empty(); again;) {
    again = false;
    for (const char* p : kPrefixes) {
      const std::string prefix = stripped + p;
      bool all = true;
      for (const auto& [name, t] : state)
        if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) all = false;
      if (all) {
        stripped = prefix;
        again = true;
        break;
      }
    }
  }
  return stripped;
}

StateDict load_checkpoint(const std::string& path, const CheckpointOptions& options, CheckpointReport* report) {
  return load_checkpoint(std::vector<std::string>{path}, options, report);
}

StateDict load_checkpoint(const std::vector<std::string>& paths_in, const CheckpointOptions& options,
                          CheckpointReport* report) {
  if (paths_in.empty()) fail_format("load_checkpoint: no files given");
  CheckpointReport r;
  std::vector<std::string> paths = paths_in;
  if (paths.size() == 1 && detect_checkpoint_format(paths[0]) == CheckpointFormat::kSafetensorsIndex) {
    paths = safetensors::shards_of_index(paths[0]);
    r.format = CheckpointFormat::kSafetensorsIndex;
  }
  bool all_safetensors = true;
  std::vector<CheckpointFormat> formats;
  for (const auto& p : paths) {
    formats.push_back(detect_checkpoint_format(p));
    if (formats.back() != CheckpointFormat::kSafetensors && formats.back() != CheckpointFormat::kPyTorchZip)
      refuse(formats.back(), p);
    all_safetensors = all_safetensors && formats.back() == CheckpointFormat::kSafetensors;
  }
  StateDict out;
  if (all_safetensors) {  // exactly what safetensors::load does, then the key
    out = safetensors::load(paths, options.device);
    if (!options.key.empty()) out = take_key(std::move(out), options.key, paths.front());
    r.key = options.key;
    if (r.format == CheckpointFormat::kUnknown) r.format = CheckpointFormat::kSafetensors;
    r.files = paths;
  } else {
    std::map<std::string, std::string> owner;
    for (std::size_t i = 0; i < paths.size(); ++i) {
      CheckpointReport part;
      StateDict sd = formats[i] == CheckpointFormat::kPyTorchZip
                         ? pytorch::load(paths[i], options, &part)
                         : (options.key.empty() ? safetensors::load(paths[i], options.device)
                                                : take_key(safetensors::load(paths[i], options.device), options.key, paths[i]));
      merge(out, std::move(sd), owner, paths[i]);
      r.key = formats[i] == CheckpointFormat::kPyTorchZip ? part.key : options.key;
      r.key_from_unwrap = part.key_from_unwrap;
      r.skipped.insert(r.skipped.end(), part.skipped.begin(), part.skipped.end());
      r.files.push_back(paths[i]);
    }
    if (r.format == CheckpointFormat::kUnknown) r.format = CheckpointFormat::kPyTorchZip;
  }
  if (options.strip_prefix) {
    r.prefix = common_prefix(out);
    if (!r.prefix.empty()) {
      StateDict stripped;
      for (auto& [name, t] : out) stripped.emplace(name.substr(r.prefix.size()), std::move(t));
      out = std::move(stripped);
    }
  }
  r.tensors = out.size();
  if (report) *report = std::move(r);
  return out;
}

std::string CheckpointReport::summary() const {
  std::ostringstream os;
  os << checkpoint_format_name(format) << ": " << tensors << " tensors";
  if (files.size() > 1) os << " from " << files.size() << " files";
  if (!key.empty()) os << " from '" << key << "'" << (key_from_unwrap ? " (the one wrapper holding tensors)" : "");
  if (!prefix.empty()) os << ", prefix '" << prefix << "' stripped";
  if (!skipped.empty()) {
    os << ", skipped " << skipped.size() << ":";
    for (std::size_t i = 0; i < skipped.size() && i < 6; ++i) os << (i ? ", " : " ") << skipped[i];
    if (skipped.size() > 6) os << " and " << skipped.size() - 6 << " more";
  }
  return os.str();
}

}  // namespace tessera::models
