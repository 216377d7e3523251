#include "tessera/io/ct_phantom.h"

#include <cmath>
#include <random>

#include "tessera/io/orientation.h"

namespace tessera::io {
namespace {

Mat3 matmul(const Mat3& a, const Mat3& b) {
  Mat3 c{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) c[i][j] += a[i][k] * b[k][j];
  return c;
}

}  // namespace

CtPhantom make_ct_phantom(const CtPhantomOptions& o) {
  const double pi = 3.14159265358979323846;
  const double tz = o.tilt_degrees * pi / 180, tx = 0.5 * o.tilt_degrees * pi / 180;
  const Mat3 rz{{{std::cos(tz), -std::sin(tz), 0}, {std::sin(tz), std::cos(tz), 0}, {0, 0, 1}}};
  const Mat3 rx{{{1, 0, 0}, {0, std::cos(tx), -std::sin(tx)}, {0, std::sin(tx), std::cos(tx)}}};

  Geometry g;
  g.size = o.size;
  g.spacing = o.spacing;
  g.direction = matmul(rz, rx);
  g.origin = {-0.5 * o.size[0] * o.spacing[0] + 3.25, -0.5 * o.size[1] * o.spacing[1] - 11.5, -310.0};

  CtPhantom p;
  p.ct = Volume::zeros(g, PixelType::kInt16);
  p.labels = Volume::zeros(g, PixelType::kUInt8);
  p.ct.source = "ct_phantom";
  p.labels.source = "ct_phantom_labels";
  // Extent of the field of view in mm along each index axis; organs are
  // placed relative to its centre (x: patient left, y: posterior, z: up).
  const Vec3 half{0.5 * o.size[0] * o.spacing[0], 0.5 * o.size[1] * o.spacing[1], 0.5 * o.size[2] * o.spacing[2]};
  auto scaled = [&](double fx, double fy, double fz) { return Vec3{fx * half[0], fy * half[1], fz * half[2]}; };
  // Later organs overwrite earlier ones: body first, then organs inside it.
  // Portal-venous-phase contrast: enhanced organs stand out of the fat-rich soft tissue.
  p.organs = {
      {"body", 0, -40, scaled(0, 0, 0), scaled(0.85, 0.7, 1.2)},
      {"liver", 1, 95, scaled(-0.35, -0.1, 0.2), scaled(0.32, 0.35, 0.45)},
      {"spleen", 2, 110, scaled(0.45, 0.25, 0.25), scaled(0.14, 0.16, 0.25)},
      {"kidney_left", 3, 160, scaled(0.3, 0.35, -0.25), scaled(0.1, 0.12, 0.3)},
      {"kidney_right", 4, 160, scaled(-0.3, 0.35, -0.3), scaled(0.1, 0.12, 0.3)},
      {"vertebra", 5, 700, scaled(0, 0.5, 0), scaled(0.09, 0.1, 1.2)},
      {"aorta", 6, 190, scaled(0.06, 0.3, 0), scaled(0.05, 0.05, 1.2)},
      {"air_in_bowel", 0, -700, scaled(0.15, -0.35, -0.3), scaled(0.1, 0.08, 0.12)},
  };
  std::mt19937 gen(o.seed);
  if (o.variation > 0) {
    std::uniform_real_distribution<double> u(-1, 1);
    for (auto& organ : p.organs) {
      if (organ.name == "body") continue;
      for (int a = 0; a < 3; ++a) {
        organ.centre_mm[a] += o.variation * 0.12 * u(gen) * 2 * half[a];
        organ.radii_mm[a] *= 1 + o.variation * 0.2 * u(gen);
      }
      organ.hu += std::round(o.variation * 15 * u(gen));
    }
  }
  std::normal_distribution<float> noise(0.f, static_cast<float>(o.noise_hu));
  auto* hu = p.ct.data<std::int16_t>();
  auto* lab = p.labels.data<std::uint8_t>();
  std::size_t idx = 0;
  for (std::int64_t k = 0; k < o.size[2]; ++k)
    for (std::int64_t j = 0; j < o.size[1]; ++j)
      for (std::int64_t i = 0; i < o.size[0]; ++i, ++idx) {
        // Position relative to the centre along the volume's own axes.
        const Vec3 q{(i + 0.5) * o.spacing[0] - half[0], (j + 0.5) * o.spacing[1] - half[1],
                     (k + 0.5) * o.spacing[2] - half[2]};
        double value = -1000;  // air outside the body
        int label = 0;
        for (const auto& organ : p.organs) {
          double r2 = 0;
          for (int a = 0; a < 3; ++a) {
            const double d = (q[a] - organ.centre_mm[a]) / organ.radii_mm[a];
            r2 += d * d;
          }
          if (r2 <= 1) {
            value = organ.hu;
            if (organ.name != "body") label = organ.label;
            if (organ.label == 0 && organ.name != "body") label = 0;
          }
        }
        const double v = std::round(value + noise(gen));
        hu[idx] = static_cast<std::int16_t>(std::max(-1024.0, std::min(3071.0, v)));
        lab[idx] = static_cast<std::uint8_t>(label);
      }
  return p;
}

CtPhantom make_random_ct_phantom(std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(0, 1);
  auto pick = [&](double lo, double hi) { return lo + (hi - lo) * u(gen); };
  CtPhantomOptions o;
  o.spacing = {pick(0.7, 1.1), 0, pick(1.5, 3.5)};
  o.spacing[1] = o.spacing[0];
  // A field of view of 130-170 mm in-plane and 140-200 mm along z.
  o.size = {std::int64_t(pick(130, 170) / o.spacing[0]), std::int64_t(pick(110, 150) / o.spacing[1]),
            std::int64_t(pick(140, 200) / o.spacing[2])};
  o.tilt_degrees = pick(-20, 20);
  o.noise_hu = pick(5, 30);
  o.seed = static_cast<std::uint32_t>(gen());
  o.variation = 1;
  CtPhantom p = make_ct_phantom(o);
  static const char* codes[] = {"LPS", "RAS", "LAS", "RPI", "LPI", "RAI"};
  const std::string code = codes[gen() % 6];
  p.ct = reorient(p.ct, code);
  p.labels = reorient(p.labels, code);
  return p;
}

}  // namespace tessera::io
