#include <torch/torch.h>

#include <stdexcept>

#include "classifier.h"
#include "tessera/models/config.h"
#include "tessera/models/linear.h"
#include "tessera/models/longnet.h"
#include "tessera/models/safetensors.h"
#include "tessera/models/state_dict.h"
#include "tessera/train/cls_dataset.h"

namespace tessera::train {
namespace {

// The slide encoder's slide embedding through a linear head. Its weights keep the encoder's
// own names under "slide_encoder.", so that embed-wsi's --slide-weights reads the fine-tuned
// encoder from the saved file with --slide-weights-prefix slide_encoder.
struct SlideClassifierImpl : torch::nn::Module {
  SlideClassifierImpl(const models::LongNetViTConfig& c, int64_t classes) {
    slide_encoder = register_module("slide_encoder", models::LongNetViT(c));
    head = register_module("head", models::Linear(c.embed_dim, classes));
  }
  // One slide: tile features [L, in_chans], level-0 coordinates [L, 2] -> logits [1, classes].
  at::Tensor forward(const at::Tensor& tiles, const at::Tensor& coords) {
    return head->forward(slide_encoder->forward(tiles.unsqueeze(0), coords.unsqueeze(0))[0]);
  }
  models::LongNetViT slide_encoder{nullptr};
  models::Linear head{nullptr};
};
TORCH_MODULE(SlideClassifier);

void check_slides(const std::vector<FeatureBag>& bags, const std::string& manifest, int64_t in_chans) {
  if (bags.empty()) throw std::runtime_error(manifest + ": no feature files");
  for (const auto& b : bags) {
    if (!b.coords.defined())
      throw std::runtime_error(manifest + ": " + b.name + " has no tile coordinates: the slide encoder reads Trident .h5 tile features");
    if (b.tokens.size(1) != in_chans)
      throw std::runtime_error(manifest + ": " + b.name + " has " + std::to_string(b.tokens.size(1)) +
                               "-wide tile features; the slide encoder takes " + std::to_string(in_chans));
  }
}

}  // namespace

Classifier slide_encoder_classifier(const TrainConfig& cfg, const TrainOptions& opt, torch::Device dev,
                                    torch::ScalarType dtype) {
  if (cfg.level != "bag") throw std::runtime_error(cfg.path + ": the slide encoder classifies whole slides: level must be bag");
  const models::LongNetViTConfig lc = models::load_longnet_vit_config(cfg.model);
  auto train_bags = std::make_shared<std::vector<FeatureBag>>(load_bags(cfg.train, cfg.labels, cfg.level, cfg.label_fps));
  auto val_bags = std::make_shared<std::vector<FeatureBag>>();
  if (opt.validate) *val_bags = load_bags(cfg.val, cfg.labels, cfg.level, cfg.label_fps);
  check_slides(*train_bags, cfg.train.path, lc.in_chans);
  if (opt.validate) check_slides(*val_bags, cfg.val.path, lc.in_chans);
  torch::manual_seed(cfg.seed);
  const int64_t classes = int64_t(cfg.labels.size());
  SlideClassifier net(lc, classes);
  if (!cfg.pretrained.empty()) {
    models::KeyMapping km;
    km.prefix = cfg.pretrained_prefix;
    models::load_longnet_vit_weights(*net->slide_encoder, {cfg.pretrained}, km);
  }
  net->to(dev);
  Classifier c;
  c.module = net.ptr();
  c.val_items = val_bags->size();
  auto run = [net, dev, dtype](const FeatureBag& b) mutable {
    return net->forward(b.tokens.to(dev, dtype), b.coords.to(dev));
  };
  c.train_batch = [=, &cfg](std::mt19937_64& gen) mutable {
    std::vector<at::Tensor> logits, labels;
    for (int64_t i = 0; i < cfg.optim.batch_size; ++i) {
      const FeatureBag& b = (*train_bags)[gen() % train_bags->size()];
      logits.push_back(run(b));
      labels.push_back(b.labels);
    }
    return std::make_pair(at::cat(logits), at::cat(labels).to(dev));
  };
  c.for_each_val = [=](const std::function<void(const at::Tensor&, const at::Tensor&)>& f) mutable {
    for (const auto& b : *val_bags) f(run(b), b.labels);
  };
  c.save = [lc, classes, cfg_path = cfg.model, labels = cfg.labels](const std::string& path,
                                                                   const std::map<std::string, at::Tensor>& w) {
    std::string names;
    for (const auto& l : labels) names += (names.empty() ? "" : ",") + l;
    models::safetensors::save(path, w, {{"model_config", cfg_path}, {"num_classes", std::to_string(classes)}, {"labels", names}});
  };
  return c;
}

}  // namespace tessera::train
