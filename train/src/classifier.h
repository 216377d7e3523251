// What the classification training loop needs from a model and its data; one
// factory per kind of model (cls_trainer.cpp: the aggregator and the ViT;
// slide_encoder_classifier.cpp: GigaPath's slide encoder).
#pragma once

#include <torch/nn/module.h>

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>

#include "tessera/train/cls_trainer.h"

namespace tessera::train {

struct Classifier {
  std::shared_ptr<torch::nn::Module> module;
  std::function<std::pair<at::Tensor, at::Tensor>(std::mt19937_64&)> train_batch;  // (logits, labels), both on the device
  std::function<void(const std::function<void(const at::Tensor&, const at::Tensor&)>&)> for_each_val;  // (logits, labels)
  std::function<void(const std::string&, const std::map<std::string, at::Tensor>&)> save;  // fp32 weights -> model.safetensors
  size_t val_items = 0;
};

// `model:` a LongNetViT config (configs/gigapath_slide_*.yaml): the slide encoder, optionally from
// `pretrained` (e.g. the published slide_encoder.pth), with a linear head on its slide embedding,
// over Trident .h5 tile features at their level-0 coordinates (bag level).
Classifier slide_encoder_classifier(const TrainConfig& cfg, const TrainOptions& opt, torch::Device dev,
                                    torch::ScalarType dtype);

}  // namespace tessera::train
