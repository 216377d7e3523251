#include "tessera/train/cls_dataset.h"

#include <torch/torch.h>

#include <filesystem>
#include <stdexcept>

#include "class_index.h"
#include "csv_rows.h"
#include "tessera/io/features.h"
#include "tessera/models/safetensors.h"
#include "tessera/train/phase_labels.h"
#if TESSERA_IO_HAS_HDF5
#include "tessera/io/features_h5.h"
#endif

namespace tessera::train {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

// A frame-level phase annotation (Cholec80) -> a label per embedded second; an unlabelled ragged last second is dropped.
void label_by_frames(FeatureBag& b, const std::string& labels, const std::string& features, const std::vector<std::string>& classes,
                     double label_fps) {
  const at::Tensor s = b.positions.select(1, 0).floor().to(torch::kLong).contiguous();
  const std::vector<int64_t> seconds(s.data_ptr<int64_t>(), s.data_ptr<int64_t>() + s.numel());
  // Majority, not the centre frame: a second that spans a phase change gets the phase most of its frames (and so its mean embedding) show.
  const auto ids = labels_at_seconds(majority_per_second(read_frame_phases(labels, classes), label_fps), seconds, labels, features);
  const auto n = int64_t(ids.size());
  b.tokens = b.tokens.narrow(0, 0, n);
  b.positions = b.positions.narrow(0, 0, n);
  b.labels = torch::tensor(ids, torch::kLong);
}

}  // namespace

FeatureBag read_feature_file(const std::string& path) {
  FeatureBag b;
  b.name = fs::path(path).stem().string();
  if (ends_with(path, ".safetensors")) {
    const auto t = models::safetensors::load(path);
    const auto e = t.find("embeddings"), s = t.find("seconds");
    if (e == t.end() || s == t.end()) throw std::runtime_error(path + ": expected tensors `embeddings` [T, D] and `seconds` [T]");
    if (e->second.dim() != 2 || s->second.dim() != 1 || s->second.size(0) != e->second.size(0))
      throw std::runtime_error(path + ": `embeddings` must be [T, D] and `seconds` [T]");
    b.tokens = e->second.to(torch::kFloat).contiguous();
    b.positions = s->second.to(torch::kFloat).unsqueeze(1).contiguous();
  } else if (ends_with(path, ".h5")) {
#if TESSERA_IO_HAS_HDF5
    const io::PatchFeatures f = io::read_patch_features(path);
    if (f.n == 0) throw std::runtime_error(path + ": no features");
    b.tokens = torch::from_blob(const_cast<float*>(f.features.data()), {f.n, f.dim}, torch::kFloat).clone();
    const double cell = f.patch_size_level0 > 0 ? double(f.patch_size_level0) : 1.0;
    b.coords = torch::from_blob(const_cast<int64_t*>(f.coords.data()), {f.n, 2}, torch::kLong).to(torch::kFloat);
    b.positions = b.coords / cell;
#else
    throw std::runtime_error(path + ": this build has no HDF5 support");
#endif
  } else {
    throw std::runtime_error(path + ": feature files are .h5 (Trident/CLAM) or .safetensors (tessera video)");
  }
  if (!torch::isfinite(b.tokens).all().item<bool>()) throw std::runtime_error(path + ": features hold NaN or infinity");
  return b;
}

std::vector<FeatureBag> load_bags(const DataSplit& split, const std::vector<std::string>& classes, const std::string& level,
                                  double label_fps) {
  const fs::path base = fs::path(split.path).parent_path();
  auto abs = [&](const std::string& p) { return fs::path(p).is_absolute() ? p : (base / p).string(); };
  std::vector<FeatureBag> bags;
  for (const auto& r : read_csv_rows(split.path, {"features", "label"})) {
    FeatureBag b = read_feature_file(abs(r.at("features")));
    if (level == "bag") {
      b.labels = torch::tensor({class_index(r.at("label"), classes, split.path)}, torch::kLong);
    } else if (const std::string lp = abs(r.at("label")); is_frame_annotation(lp)) {
      label_by_frames(b, lp, abs(r.at("features")), classes, label_fps);
    } else {
      const auto rows = read_csv_rows(lp, {});
      const std::string col = rows.front().count("label") ? "label" : "phase";
      if (!rows.front().count(col)) throw std::runtime_error(lp + ": per-token labels need a column `label` or `phase`");
      if (int64_t(rows.size()) != b.tokens.size(0))
        throw std::runtime_error(lp + ": " + std::to_string(rows.size()) + " label rows for " + std::to_string(b.tokens.size(0)) +
                                 " tokens of " + r.at("features"));
      std::vector<int64_t> ids;
      for (const auto& row : rows) ids.push_back(class_index(row.at(col), classes, lp));
      b.labels = torch::tensor(ids, torch::kLong);
    }
    bags.push_back(std::move(b));
  }
  return bags;
}

}  // namespace tessera::train
