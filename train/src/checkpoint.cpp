#include "tessera/train/checkpoint.h"

#include <stdexcept>

#include "tessera/models/safetensors.h"

namespace tessera::train {
namespace {

const char* kFormat = "tessera-train-checkpoint/1";

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& c) {
  models::StateDict all;
  for (const auto& [k, t] : c.model) all["model." + k] = t;
  for (const auto& [k, t] : c.exp_avg) all["optim.exp_avg." + k] = t;
  for (const auto& [k, t] : c.exp_avg_sq) all["optim.exp_avg_sq." + k] = t;
  std::map<std::string, std::string> meta = c.info;
  meta["format"] = kFormat;
  meta["step"] = std::to_string(c.step);
  meta["seed"] = std::to_string(c.seed);
  char scale[64];
  std::snprintf(scale, sizeof scale, "%.17g", c.loss_scale);
  meta["loss_scale"] = scale;
  models::safetensors::save(path, all, meta);
}

Checkpoint load_checkpoint(const std::string& path) {
  const auto meta = models::safetensors::metadata(path);
  const auto it = meta.find("format");
  if (it == meta.end() || it->second != kFormat)
    throw std::runtime_error(path + ": not a Tessera training checkpoint (metadata format != " + kFormat + ")");
  Checkpoint c;
  try {
    c.step = std::stoll(meta.at("step"));
    c.seed = std::stoull(meta.at("seed"));
    c.loss_scale = std::stod(meta.at("loss_scale"));
  } catch (const std::exception&) {
    throw std::runtime_error(path + ": checkpoint metadata step/seed/loss_scale missing or malformed");
  }
  for (const auto& [k, v] : meta)
    if (k != "format" && k != "step" && k != "seed" && k != "loss_scale") c.info[k] = v;
  auto starts = [](const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; };
  for (auto& [k, t] : models::safetensors::load(path)) {
    if (starts(k, "model.")) c.model[k.substr(6)] = t;
    else if (starts(k, "optim.exp_avg_sq.")) c.exp_avg_sq[k.substr(17)] = t;
    else if (starts(k, "optim.exp_avg.")) c.exp_avg[k.substr(14)] = t;
    else throw std::runtime_error(path + ": unexpected tensor `" + k + "` in a training checkpoint");
  }
  return c;
}

}  // namespace tessera::train
