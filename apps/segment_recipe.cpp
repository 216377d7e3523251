#include "segment_recipe.h"

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <stdexcept>

namespace tessera::apps {
namespace {

using Handlers = std::map<std::string, std::function<void(const YAML::Node&)>>;

// Hands each key of `node` (a mapping) to its handler; unknown keys and wrong types name the file and key.
void read_map(const std::string& path, const std::string& where, const YAML::Node& node, const Handlers& handlers) {
  if (!node.IsMap()) throw std::runtime_error(path + ": `" + where + "` must be a mapping");
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    const auto it = handlers.find(key);
    if (it == handlers.end()) throw std::runtime_error(path + ": unknown key `" + where + "." + key + "`");
    try {
      it->second(kv.second);
    } catch (const YAML::Exception&) {
      throw std::runtime_error(path + ": `" + where + "." + key + "` has the wrong type");
    }
  }
}

template <typename T> std::function<void(const YAML::Node&)> to(std::optional<T>& dst) {
  return [&dst](const YAML::Node& n) { dst = n.as<T>(); };
}

void check_one_of(const std::string& path, const std::string& key, const std::optional<std::string>& v,
                  const std::vector<std::string>& allowed) {
  if (!v) return;
  for (const auto& a : allowed)
    if (*v == a) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw std::runtime_error(path + ": `" + key + "` must be one of " + list + ", got `" + *v + "`");
}

}  // namespace

SegmentRecipe read_segment_recipe(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(path + ": not a readable YAML file: " + e.what());
  }
  SegmentRecipe r;
  const YAML::Node inf = root.IsMap() ? root["inference"] : YAML::Node();
  if (!inf) return r;
  std::optional<std::string> axcodes;
  read_map(path, "inference", inf,
           {{"source", [](const YAML::Node&) {}},
            {"orientation", [&](const YAML::Node& n) { read_map(path, "inference.orientation", n, {{"axcodes", to(axcodes)}}); }},
            {"spacing", [&](const YAML::Node& n) {
               read_map(path, "inference.spacing", n, {{"pixdim", to(r.pixdim)}, {"mode", to(r.spacing_mode)}});
             }},
            {"scale_intensity_range", [&](const YAML::Node& n) {
               read_map(path, "inference.scale_intensity_range", n,
                        {{"a_min", to(r.a_min)}, {"a_max", to(r.a_max)}, {"b_min", to(r.b_min)}, {"b_max", to(r.b_max)},
                         {"clip", to(r.clip)}});
             }},
            {"sliding_window", [&](const YAML::Node& n) {
               read_map(path, "inference.sliding_window", n,
                        {{"roi_size", to(r.roi_size)}, {"sw_batch_size", to(r.sw_batch_size)}, {"overlap", to(r.overlap)},
                         {"mode", to(r.mode)}});
             }},
            {"invert", [&](const YAML::Node& n) { read_map(path, "inference.invert", n, {{"nearest_interp", to(r.nearest_interp)}}); }},
            {"labels", [&](const YAML::Node& n) { r.labels = n.as<std::vector<std::string>>(); }}});
  // segment reorients to RAS, as every MONAI CT recipe does; any other target would be silently ignored.
  if (axcodes && *axcodes != "RAS")
    throw std::runtime_error(path + ": `inference.orientation.axcodes` " + *axcodes + " is not supported (segment works in RAS)");
  check_one_of(path, "inference.spacing.mode", r.spacing_mode, {"bilinear", "nearest"});
  check_one_of(path, "inference.sliding_window.mode", r.mode, {"constant", "gaussian"});
  if (r.pixdim && r.pixdim->size() != 3) throw std::runtime_error(path + ": `inference.spacing.pixdim` needs 3 values (mm, x y z)");
  for (double p : r.pixdim.value_or(std::vector<double>{}))
    if (!(p > 0)) throw std::runtime_error(path + ": `inference.spacing.pixdim` values must be > 0");
  if (r.roi_size && r.roi_size->size() != 3) throw std::runtime_error(path + ": `inference.sliding_window.roi_size` needs 3 values");
  if (r.overlap && !(*r.overlap >= 0 && *r.overlap < 1)) throw std::runtime_error(path + ": `inference.sliding_window.overlap` must be in [0, 1)");
  if (r.sw_batch_size && *r.sw_batch_size < 1) throw std::runtime_error(path + ": `inference.sliding_window.sw_batch_size` must be >= 1");
  return r;
}

}  // namespace tessera::apps
