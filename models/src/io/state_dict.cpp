#include "tessera/models/state_dict.h"

#include <torch/torch.h>

#include <set>
#include <sstream>

#include "tessera/models/checkpoint.h"

namespace tessera::models {
namespace {

std::string replace_components(std::string key, const std::string& from, const std::string& to) {
  if (from.empty()) return key;
  std::size_t pos = 0;
  while ((pos = key.find(from, pos)) != std::string::npos) {
    if (pos == 0 || key[pos - 1] == '.') {
      key.replace(pos, from.size(), to);
      pos += to.size();
    } else {
      pos += 1;
    }
  }
  return key;
}

// "a, b, c and 12 more": keeps one-line errors readable for whole-model mismatches.
std::string list(const std::vector<std::string>& names, std::size_t shown = 8) {
  std::ostringstream os;
  for (std::size_t i = 0; i < names.size() && i < shown; ++i) os << (i ? ", " : "") << names[i];
  if (names.size() > shown) os << " and " << names.size() - shown << " more";
  return os.str();
}

}  // namespace

StateDict remap_keys(const StateDict& state, const KeyMapping& m) {
  const std::set<std::string> ignore(m.ignore.begin(), m.ignore.end());
  bool any_prefixed = false;
  for (const auto& kv : state) any_prefixed = any_prefixed || kv.first.compare(0, m.prefix.size(), m.prefix) == 0;
  const std::string prefix = (m.prefix_optional && !any_prefixed) ? "" : m.prefix;
  StateDict out;
  for (const auto& [key, t] : state) {
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    std::string k = key.substr(prefix.size());
    for (const auto& [from, to] : m.renames) k = replace_components(k, from, to);
    if (ignore.count(k)) continue;
    if (!out.emplace(k, t).second) throw std::runtime_error("remap_keys: two keys map to '" + k + "'");
  }
  return out;
}

std::string LoadReport::summary() const {
  std::ostringstream os;
  os << "loaded " << loaded << " tensors";
  if (!missing.empty()) os << "; missing " << missing.size() << ": " << list(missing);
  if (!unexpected.empty()) os << "; unexpected " << unexpected.size() << ": " << list(unexpected);
  return os.str();
}

StateDict state_dict(const torch::nn::Module& module) {
  StateDict out;
  for (const auto& p : module.named_parameters(true)) out.emplace(p.key(), p.value());
  for (const auto& b : module.named_buffers(true)) out.emplace(b.key(), b.value());
  return out;
}

LoadReport load_state_dict(torch::nn::Module& module, const StateDict& state, bool strict) {
  const StateDict own = state_dict(module);
  LoadReport r;
  std::vector<std::string> mismatched;
  for (const auto& [name, target] : own) {
    const auto it = state.find(name);
    if (it == state.end()) {
      r.missing.push_back(name);
    } else if (it->second.sizes() != target.sizes()) {
      std::ostringstream os;
      os << name << " (file " << it->second.sizes() << ", model " << target.sizes() << ")";
      mismatched.push_back(os.str());
    }
  }
  for (const auto& [name, t] : state)
    if (!own.count(name)) r.unexpected.push_back(name);
  if (!mismatched.empty()) throw std::runtime_error("load_state_dict: shape mismatch for " + list(mismatched));
  if (strict && !r.complete()) throw std::runtime_error("load_state_dict: " + r.summary());
  torch::NoGradGuard no_grad;
  for (const auto& [name, target] : own) {
    const auto it = state.find(name);
    if (it == state.end()) continue;
    // copy_ keeps the module's dtype/device (an F32 index table lands in an int64 buffer).
    auto t = target;
    t.copy_(it->second);
    ++r.loaded;
  }
  return r;
}

StateDict read_weights(const std::vector<std::string>& files, const KeyMapping& mapping, const torch::Device& device) {
  // Safetensors load exactly as before; a PyTorch file's wrapper prefix (module., ...) goes unless a prefix was asked for.
  bool pytorch = false;
  for (const auto& f : files) {
    const auto fmt = detect_checkpoint_format(f);
    pytorch = pytorch || (fmt != CheckpointFormat::kSafetensors && fmt != CheckpointFormat::kSafetensorsIndex);
  }
  CheckpointOptions options;
  options.strip_prefix = pytorch && (mapping.prefix.empty() || mapping.prefix_optional);
  options.device = device;
  return remap_keys(load_checkpoint(files, options), mapping);
}

LoadReport apply_weights(torch::nn::Module& module, StateDict state, const std::vector<std::string>& files, bool strict,
                         const std::function<StateDict(StateDict)>& adapt) {
  try {
    if (adapt) state = adapt(std::move(state));
    return load_state_dict(module, state, strict);
  } catch (const std::runtime_error& e) {  // name the files: a checkpoint of another model is the usual cause
    std::string names;
    for (const auto& f : files) names += (names.empty() ? "" : ", ") + f;
    throw std::runtime_error(names + ": " + e.what());
  }
}

LoadReport load_weights(torch::nn::Module& module, const std::vector<std::string>& files, const KeyMapping& mapping,
                        bool strict, const std::function<StateDict(StateDict)>& adapt) {
  return apply_weights(module, read_weights(files, mapping), files, strict, adapt);
}

}  // namespace tessera::models
