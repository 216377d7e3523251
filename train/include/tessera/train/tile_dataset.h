// Labelled tile images for ViT classification training: an ImageFolder
// layout (DIR/<class name>/*.png|jpg|tif, as torchvision and timm use) or a
// CSV with columns image,label. Images are read once, resized to the model's
// input size (bilinear) and kept as uint8.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "tessera/train/train_config.h"

namespace tessera::train {

struct TileSet {
  at::Tensor images;  // uint8 [N, 3, size, size]
  at::Tensor labels;  // int64 [N]
  std::vector<std::string> files;
};

TileSet load_tiles(const DataSplit& split, const std::vector<std::string>& classes, int64_t size);

// uint8 [B, 3, H, W] -> float32, ImageNet mean/std (timm's ViTs and UNI).
at::Tensor normalize_tiles(const at::Tensor& images);

}  // namespace tessera::train
