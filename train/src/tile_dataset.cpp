#include "tessera/train/tile_dataset.h"

#include <torch/torch.h>

#include <filesystem>
#include <set>
#include <stdexcept>

#include "csv_rows.h"
#include "tessera/io/features.h"
#if TESSERA_IO_HAS_OPENCV
#include "tessera/io/image_file.h"
#endif

namespace tessera::train {
namespace {

namespace fs = std::filesystem;

at::Tensor read_resized(const std::string& path, int64_t size) {
#if TESSERA_IO_HAS_OPENCV
  const io::RgbImage img = io::read_image(path);
  at::Tensor t = torch::from_blob(const_cast<uint8_t*>(img.rgb.data()), {img.height, img.width, 3}, torch::kByte)
                     .permute({2, 0, 1})
                     .to(torch::kFloat)
                     .unsqueeze(0);
  if (img.height != size || img.width != size)
    t = torch::upsample_bilinear2d(t, {size, size}, /*align_corners=*/false);
  return t.squeeze(0).round().clamp(0, 255).to(torch::kByte);
#else
  (void)size;
  throw std::runtime_error(path + ": this build has no OpenCV to read images");
#endif
}

int64_t class_of(const std::string& name, const std::vector<std::string>& classes, const std::string& where) {
  for (size_t i = 0; i < classes.size(); ++i)
    if (classes[i] == name) return int64_t(i);
  throw std::runtime_error(where + ": class `" + name + "` is not among the config's labels");
}

}  // namespace

TileSet load_tiles(const DataSplit& split, const std::vector<std::string>& classes, int64_t size) {
  std::vector<std::pair<std::string, int64_t>> items;
  if (split.source == "folder") {
    for (const auto& e : fs::directory_iterator(split.path)) {
      if (!e.is_directory()) continue;
      const int64_t k = class_of(e.path().filename().string(), classes, e.path().string());
      std::set<std::string> files;
      for (const auto& f : fs::directory_iterator(e.path()))
        if (f.is_regular_file() && f.path().filename().string()[0] != '.') files.insert(f.path().string());
      for (const auto& f : files) items.push_back({f, k});
    }
    std::sort(items.begin(), items.end());
  } else if (split.source == "csv") {
    const fs::path base = fs::path(split.path).parent_path();
    for (const auto& r : read_csv_rows(split.path, {"image", "label"})) {
      const std::string p = fs::path(r.at("image")).is_absolute() ? r.at("image") : (base / r.at("image")).string();
      items.push_back({p, class_of(r.at("label"), classes, split.path)});
    }
  } else {
    throw std::runtime_error(split.path + ": tile classification reads a folder (one subfolder per class) or a CSV");
  }
  if (items.empty()) throw std::runtime_error(split.path + ": no images");
  TileSet s;
  std::vector<at::Tensor> imgs;
  std::vector<int64_t> labels;
  for (const auto& [f, k] : items) {
    imgs.push_back(read_resized(f, size));
    labels.push_back(k);
    s.files.push_back(f);
  }
  s.images = at::stack(imgs);
  s.labels = torch::tensor(labels, torch::kLong);
  return s;
}

at::Tensor normalize_tiles(const at::Tensor& images) {
  const auto opt = images.options().dtype(torch::kFloat);
  const at::Tensor mean = torch::tensor({0.485f, 0.456f, 0.406f}).to(opt.device()).view({1, 3, 1, 1});
  const at::Tensor stdv = torch::tensor({0.229f, 0.224f, 0.225f}).to(opt.device()).view({1, 3, 1, 1});
  return (images.to(torch::kFloat) / 255.0f - mean) / stdv;
}

}  // namespace tessera::train
