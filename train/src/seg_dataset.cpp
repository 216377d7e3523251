#include "tessera/train/seg_dataset.h"

#include <omp.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <set>
#include <stdexcept>

#include "tessera/io/cores.h"
#include "tessera/io/ct_phantom.h"
#include "tessera/io/orientation.h"
#include "tessera/io/volume_io.h"
#include "tessera/patching/intensity.h"
#include "tessera/patching/spacing.h"
#include "tessera/patching/volume_tensor.h"
#include "csv_rows.h"

namespace tessera::train {
namespace {

namespace fs = std::filesystem;

struct PairPaths {
  std::string name, image, label;
};

std::string strip_extension(const std::string& file) {
  for (const char* ext : {".nii.gz", ".nii", ".nrrd", ".mha", ".mhd"}) {
    const std::string e(ext);
    if (file.size() > e.size() && file.compare(file.size() - e.size(), e.size(), e) == 0)
      return file.substr(0, file.size() - e.size());
  }
  return file;
}

// MSD / nnU-Net layout: imagesTr/<case>[_0000].nii.gz with labelsTr/<case>.nii.gz.
std::vector<PairPaths> pairs_from_folder(const std::string& dir) {
  const fs::path images = fs::path(dir) / "imagesTr", labels = fs::path(dir) / "labelsTr";
  if (!fs::is_directory(images) || !fs::is_directory(labels))
    throw std::runtime_error(dir + ": expected subfolders imagesTr/ and labelsTr/ (files or DICOM folders of the same name)");
  std::set<std::string> sorted;
  for (const auto& e : fs::directory_iterator(images))
    if (e.path().filename().string()[0] != '.') sorted.insert(e.path().filename().string());
  std::vector<PairPaths> out;
  for (const auto& f : sorted) {
    std::string stem = strip_extension(f);
    fs::path lab = labels / f;
    if (!fs::exists(lab) && stem.size() > 5 && stem.compare(stem.size() - 5, 5, "_0000") == 0) {
      stem.resize(stem.size() - 5);
      lab = labels / (stem + f.substr(strip_extension(f).size()));
    }
    if (!fs::exists(lab)) throw std::runtime_error((images / f).string() + ": no label file " + lab.string());
    out.push_back({stem, (images / f).string(), lab.string()});
  }
  if (out.empty()) throw std::runtime_error(images.string() + ": no images");
  return out;
}

// CSV with a header naming `image` and `label` columns; paths relative to the CSV's folder.
std::vector<PairPaths> pairs_from_csv(const std::string& path) {
  const fs::path base = fs::path(path).parent_path();
  auto abs = [&](const std::string& p) { return fs::path(p).is_absolute() ? p : (base / p).string(); };
  std::vector<PairPaths> out;
  for (const auto& r : read_csv_rows(path, {"image", "label"}))
    out.push_back({strip_extension(fs::path(r.at("image")).filename().string()), abs(r.at("image")), abs(r.at("label"))});
  return out;
}

// Builds n cases with one thread per hardware thread (each case is independent
// and deterministic, so the order of work does not matter); LibTorch inside a
// worker runs single-threaded to avoid oversubscription.
std::vector<SegCase> build_parallel(int64_t n, const std::function<SegCase(int64_t)>& make,
                                    const std::function<void(int64_t, int64_t)>& progress) {
  std::vector<SegCase> out(static_cast<size_t>(n));
  const int64_t T = io::usable_cores();
  for (int64_t b = 0; b < n; b += T) {
    std::vector<std::future<void>> running;
    for (int64_t i = b; i < std::min(n, b + T); ++i)
      running.push_back(std::async(std::launch::async, [&, i] {
        omp_set_num_threads(1);
        out[static_cast<size_t>(i)] = make(i);
      }));
    for (auto& f : running) f.get();  // rethrows the first failure
    if (progress) progress(std::min(n, b + T), n);
  }
  return out;
}

}  // namespace

SegCase preprocess_case(const std::string& name, const io::Volume& image, const io::Volume& label,
                        const PreprocessConfig& pre, int64_t num_classes) {
  if (image.geometry.size != label.geometry.size)
    throw std::runtime_error(name + ": image and label sizes differ");
  for (int a = 0; a < 3; ++a)
    if (std::abs(image.geometry.spacing[a] - label.geometry.spacing[a]) > 1e-4 * image.geometry.spacing[a])
      throw std::runtime_error(name + ": image and label spacings differ");
  const io::Volume ras_img = io::reorient_to_ras(image), ras_lab = io::reorient_to_ras(label);
  at::Tensor x = patching::volume_to_tensor(ras_img);
  at::Tensor y = patching::volume_to_tensor(ras_lab);
  if (!pre.spacing.empty()) {
    const std::vector<double> sp(ras_img.geometry.spacing.begin(), ras_img.geometry.spacing.end());
    x = patching::spacing_resample(x, sp, pre.spacing, patching::Interp::linear);
    y = patching::spacing_resample(y, sp, pre.spacing, patching::Interp::nearest);
  }
  const double lo = y.min().item<double>(), hi = y.max().item<double>();
  if (lo < 0 || hi >= num_classes || (y != y.round()).any().item<bool>())
    throw std::runtime_error(name + ": label values must be integers in [0, " + std::to_string(num_classes - 1) +
                             "] (found " + std::to_string(lo) + ".." + std::to_string(hi) + ")");
  SegCase c;
  c.name = name;
  c.image = pre.zscore ? patching::normalize_intensity(x, true, true)
                       : patching::scale_intensity_range(x, pre.a_min, pre.a_max, 0, 1, true);
  c.image = c.image.contiguous();
  c.label = y.squeeze(0).to(at::kByte).contiguous();
  c.foreground = c.label.flatten().nonzero().flatten();
  return c;
}

std::vector<SegCase> load_split(const DataSplit& split, const PreprocessConfig& pre, int64_t num_classes,
                                const std::function<void(int64_t, int64_t)>& progress) {
  if (split.source == "phantom")
    return build_parallel(
        split.count,
        [&](int64_t i) {
          const uint64_t seed = split.seed + static_cast<uint64_t>(i);
          const io::CtPhantom p = io::make_random_ct_phantom(seed);
          return preprocess_case("phantom_" + std::to_string(seed), p.ct, p.labels, pre, num_classes);
        },
        progress);
  const auto pairs = split.source == "folder" ? pairs_from_folder(split.path) : pairs_from_csv(split.path);
  return build_parallel(
      int64_t(pairs.size()),
      [&](int64_t i) {
        const auto& p = pairs[static_cast<size_t>(i)];
        const io::Volume img = io::read_volume(p.image), lab = io::read_volume(p.label);
        try {
          return preprocess_case(p.name, img, lab, pre, num_classes);
        } catch (const std::exception& e) {
          throw std::runtime_error(p.label + ": " + e.what());
        }
      },
      progress);
}

}  // namespace tessera::train
