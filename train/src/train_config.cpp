#include "tessera/train/train_config.h"

#include "tessera/models/config.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <functional>
#include <map>
#include <stdexcept>

namespace tessera::train {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw std::runtime_error(path + ": " + what); }

// One YAML mapping read key by key through registered setters; a key without
// a setter is an error naming its section.
class Section {
 public:
  Section(std::string path, std::string where, YAML::Node node)
      : path_(std::move(path)), where_(std::move(where)), node_(std::move(node)) {
    if (node_ && !node_.IsNull() && !node_.IsMap()) fail(path_, "`" + where_ + "` must be a mapping");
  }
  template <typename T>
  Section& field(const std::string& key, T& dst) {
    setters_[key] = [this, key, &dst](const YAML::Node& n) {
      try {
        dst = n.as<T>();
      } catch (const YAML::Exception&) {
        fail(path_, "key `" + name(key) + "` has the wrong type");
      }
    };
    return *this;
  }
  Section& section(const std::string& key, const std::function<void(Section&)>& read) {
    setters_[key] = [this, key, read](const YAML::Node& n) {
      Section s(path_, name(key), n);
      read(s);
      s.run();
    };
    return *this;
  }
  void run() {
    if (!node_ || node_.IsNull()) return;
    for (const auto& kv : node_) {
      const auto key = kv.first.as<std::string>();
      const auto it = setters_.find(key);
      if (it == setters_.end()) fail(path_, "unknown key `" + name(key) + "`");
      it->second(kv.second);
    }
  }

 private:
  std::string name(const std::string& key) const { return where_.empty() ? key : where_ + "." + key; }
  std::string path_, where_;
  YAML::Node node_;
  std::map<std::string, std::function<void(const YAML::Node&)>> setters_;
};

void read_split(Section& s, DataSplit& d) {
  s.field("source", d.source).field("path", d.path).field("count", d.count).field("seed", d.seed);
}

// A path as written in the config: as given when it exists from here, else relative to the config's folder.
std::string resolve(const std::string& p, const std::string& config_path) {
  if (p.empty() || fs::path(p).is_absolute() || fs::exists(p)) return p;
  const fs::path beside = fs::path(config_path).parent_path() / p;
  return fs::exists(beside) ? beside.string() : p;
}

}  // namespace

void TrainConfig::validate() const {
  auto bad = [&](const std::string& w) { fail(path, w); };
  if (task != "segmentation" && task != "classification") bad("task must be segmentation or classification, got `" + task + "`");
  if (task == "segmentation") {
    if (model.empty()) bad("`model` (a Swin UNETR config YAML) is required");
    if (!fs::exists(model)) bad("model config " + model + " does not exist");
  } else {
    if (level != "bag" && level != "token") bad("level must be bag or token, got `" + level + "`");
    const auto& a = aggregator;
    if (a.dim <= 0 || a.depth <= 0 || a.num_heads <= 0 || a.dim % a.num_heads) bad("aggregator: dim must be a positive multiple of num_heads");
    if (a.position != "none" && a.position != "rope1d" && a.position != "rope2d") bad("aggregator.position must be none, rope1d or rope2d");
    if (!model.empty() && !fs::exists(model)) bad("model config " + model + " does not exist");
    const bool slide_encoder = !model.empty() && models::config_model_kind(model) == "longnet_vit";
    if ((model.empty() || slide_encoder) && (train.source != "csv" || val.source != "csv"))
      bad(std::string(slide_encoder ? "slide encoder" : "aggregator") +
          " classification reads train and val from CSV manifests of feature files (source: csv)");
    if (slide_encoder && level != "bag") bad("the slide encoder (model: longnet_vit) classifies whole slides: level must be bag");
    if (!slide_encoder && !model.empty() && (train.source == "phantom" || val.source == "phantom"))
      bad("ViT tile classification reads a folder (one subfolder per class) or a CSV, not phantoms");
  }
  if (!pretrained.empty() && !fs::exists(pretrained)) bad("pretrained weights " + pretrained + " do not exist");
  if (pretrained_keys != "monai" && pretrained_keys != "ssl" && pretrained_keys != "research")
    bad("pretrained_keys must be monai, ssl or research");
  for (const auto* split : {&train, &val}) {
    const std::string which = split == &train ? "train" : "val";
    if (split->source == "phantom") {
      if (split->count <= 0) bad(which + ".count must be positive for phantom data");
    } else if (split->source == "folder" || split->source == "csv") {
      if (split->path.empty()) bad(which + ".path is required for " + split->source + " data");
      if (!fs::exists(split->path)) bad(which + ".path " + split->path + " does not exist");
    } else {
      bad(which + ".source must be phantom, folder or csv, got `" + split->source + "`");
    }
  }
  if (!preprocess.spacing.empty() && preprocess.spacing.size() != 3) bad("preprocess.spacing needs 3 values");
  for (double s : preprocess.spacing)
    if (!(s > 0)) bad("preprocess.spacing values must be positive");
  if (!(preprocess.a_max > preprocess.a_min)) bad("preprocess.a_max must exceed a_min");
  for (int64_t r : crop.roi)
    if (r <= 0 || r % 32) bad("crop.roi sides must be positive multiples of 32, got " + std::to_string(r));
  if (crop.foreground_fraction < 0 || crop.foreground_fraction > 1) bad("crop.foreground_fraction must be in [0, 1]");
  for (int a : augment.flip_axes)
    if (a < 0 || a > 2) bad("augment.flip_axes holds axes 0, 1, 2");
  if (optim.steps <= 0 || optim.batch_size <= 0) bad("optim.steps and optim.batch_size must be positive");
  if (!(optim.lr > 0) || optim.min_lr < 0 || optim.min_lr > optim.lr) bad("need 0 <= optim.min_lr <= optim.lr, lr > 0");
  if (optim.warmup_steps < 0 || optim.warmup_steps > optim.steps) bad("optim.warmup_steps must be in [0, steps]");
  if (optim.beta1 < 0 || optim.beta1 >= 1 || optim.beta2 < 0 || optim.beta2 >= 1 || !(optim.eps > 0))
    bad("optim betas must be in [0, 1) and eps positive");
  if (optim.dice_weight < 0 || optim.ce_weight < 0 || optim.dice_weight + optim.ce_weight <= 0)
    bad("optim.dice_weight and ce_weight must be >= 0, not both 0");
  if (validation.every < 0 || validation.sw_batch <= 0) bad("validation.every >= 0 and sw_batch > 0 required");
  if (validation.overlap < 0 || validation.overlap >= 1) bad("validation.overlap must be in [0, 1)");
  if (!(label_fps >= 1)) bad("label_fps (frames per second of phase annotations) must be at least 1");
  if (labels.size() < 2) bad("`labels` must name the background and at least one class");
}

TrainConfig load_train_config(const std::string& yaml_path) {
  TrainConfig c;
  c.path = yaml_path;
  YAML::Node root;
  try {
    root = YAML::LoadFile(yaml_path);
  } catch (const YAML::BadFile&) {
    fail(yaml_path, "cannot open the training config");
  } catch (const YAML::Exception& e) {
    fail(yaml_path, std::string("not valid YAML (") + e.what() + ")");
  }
  if (!root.IsMap()) fail(yaml_path, "a training config is a YAML mapping");
  Section top(yaml_path, "", root);
  std::string description;
  top.field("description", description)
      .field("task", c.task)
      .field("level", c.level)
      .section("aggregator", [&](Section& s) {
        auto& a = c.aggregator;
        s.field("dim", a.dim).field("depth", a.depth).field("num_heads", a.num_heads).field("mlp_ratio", a.mlp_ratio)
            .field("position", a.position).field("rope_base", a.rope_base).field("causal", a.causal);
      })
      .field("model", c.model)
      .field("pretrained", c.pretrained)
      .field("pretrained_keys", c.pretrained_keys)
      .field("pretrained_prefix", c.pretrained_prefix)
      .field("labels", c.labels)
      .field("label_fps", c.label_fps)
      .field("seed", c.seed)
      .section("train", [&](Section& s) { read_split(s, c.train); })
      .section("val", [&](Section& s) { read_split(s, c.val); })
      .section("preprocess", [&](Section& s) {
        s.field("spacing", c.preprocess.spacing).field("a_min", c.preprocess.a_min).field("a_max", c.preprocess.a_max)
            .field("zscore", c.preprocess.zscore);
      })
      .section("crop", [&](Section& s) {
        s.field("roi", c.crop.roi).field("foreground_fraction", c.crop.foreground_fraction);
      })
      .section("augment", [&](Section& s) {
        s.field("flip_axes", c.augment.flip_axes).field("flip_prob", c.augment.flip_prob)
            .field("intensity_scale", c.augment.intensity_scale).field("intensity_shift", c.augment.intensity_shift)
            .field("intensity_prob", c.augment.intensity_prob);
      })
      .section("optim", [&](Section& s) {
        auto& o = c.optim;
        s.field("steps", o.steps).field("batch_size", o.batch_size).field("lr", o.lr).field("min_lr", o.min_lr)
            .field("weight_decay", o.weight_decay).field("beta1", o.beta1).field("beta2", o.beta2).field("eps", o.eps)
            .field("warmup_steps", o.warmup_steps).field("grad_clip", o.grad_clip)
            .field("dice_weight", o.dice_weight).field("ce_weight", o.ce_weight);
      })
      .section("validation", [&](Section& s) {
        s.field("every", c.validation.every).field("overlap", c.validation.overlap)
            .field("sw_batch", c.validation.sw_batch);
      });
  top.run();
  c.model = resolve(c.model, yaml_path);
  c.pretrained = resolve(c.pretrained, yaml_path);
  c.train.path = resolve(c.train.path, yaml_path);
  c.val.path = resolve(c.val.path, yaml_path);
  c.validate();
  return c;
}

}  // namespace tessera::train
