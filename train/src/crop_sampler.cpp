#include "tessera/train/crop_sampler.h"

#include <algorithm>
#include <array>
#include <random>
#include <stdexcept>

namespace tessera::train {
namespace {

// splitmix64: decorrelates (seed, step) pairs before they seed the generator.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The ROI around `centre` (voxel), shifted to lie inside the image where the
// image is large enough; where it is smaller, the crop is padded (image 0, label 0).
std::pair<at::Tensor, at::Tensor> crop_at(const SegCase& c, const std::array<int64_t, 3>& centre,
                                          const std::array<int64_t, 3>& roi) {
  at::Tensor img = c.image, lab = c.label;  // [1, X, Y, Z], [X, Y, Z]
  std::vector<int64_t> pad;                 // F.pad order: last dim first
  std::array<int64_t, 3> start{};
  for (int a = 0; a < 3; ++a) {
    const int64_t n = lab.size(a);
    if (n >= roi[a]) {
      start[a] = std::min(std::max<int64_t>(0, centre[a] - roi[a] / 2), n - roi[a]);
    } else {
      start[a] = 0;
    }
  }
  for (int a = 0; a < 3; ++a) {
    const int64_t len = std::min(roi[a], lab.size(a));
    img = img.narrow(a + 1, start[a], len);
    lab = lab.narrow(a, start[a], len);
  }
  for (int a = 2; a >= 0; --a) {
    const int64_t missing = roi[a] - lab.size(a);
    pad.push_back(missing / 2);
    pad.push_back(missing - missing / 2);
  }
  if (std::any_of(pad.begin(), pad.end(), [](int64_t p) { return p > 0; })) {
    img = at::constant_pad_nd(img, pad, 0.0);
    lab = at::constant_pad_nd(lab, pad, 0);
  }
  return {img, lab};
}

}  // namespace

SegBatch sample_batch(const std::vector<SegCase>& cases, const CropConfig& crop, const AugmentConfig& aug,
                      int64_t batch_size, uint64_t seed, int64_t step) {
  if (cases.empty()) throw std::invalid_argument("sample_batch: no training cases");
  std::mt19937_64 gen(mix(seed ^ mix(static_cast<uint64_t>(step))));
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<at::Tensor> imgs, labs;
  for (int64_t b = 0; b < batch_size; ++b) {
    const SegCase& c = cases[gen() % cases.size()];
    const int64_t X = c.label.size(0), Y = c.label.size(1), Z = c.label.size(2);
    int64_t flat;
    if (u(gen) < crop.foreground_fraction && c.foreground.numel() > 0)
      flat = c.foreground[static_cast<int64_t>(gen() % static_cast<uint64_t>(c.foreground.numel()))].item<int64_t>();
    else
      flat = static_cast<int64_t>(gen() % static_cast<uint64_t>(X * Y * Z));
    const std::array<int64_t, 3> centre{flat / (Y * Z), (flat / Z) % Y, flat % Z};
    auto [img, lab] = crop_at(c, centre, crop.roi);
    for (int a : aug.flip_axes)
      if (u(gen) < aug.flip_prob) {
        img = img.flip({a + 1});
        lab = lab.flip({a});
      }
    if (u(gen) < aug.intensity_prob) {
      const double scale = 1 + aug.intensity_scale * (2 * u(gen) - 1);
      const double shift = aug.intensity_shift * (2 * u(gen) - 1);
      img = img * scale + shift;
    }
    imgs.push_back(img.contiguous());
    labs.push_back(lab.to(at::kLong).contiguous());
  }
  return {at::stack(imgs), at::stack(labs)};
}

}  // namespace tessera::train
