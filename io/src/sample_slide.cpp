#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "tessera/io/samples.h"

namespace tessera::io {
namespace {

constexpr int kCell = 14;  // one candidate nucleus per cell of a grid
constexpr int kRadius = 3;

// A cell's own random numbers: a hash of (seed, cell, k), so that a region needs no state from elsewhere.
double cell_uniform(std::uint32_t seed, int gx, int gy, int k) {
  std::uint64_t h = (std::uint64_t(seed) << 40) ^ (std::uint64_t(std::uint32_t(gx)) << 20) ^ std::uint64_t(std::uint32_t(gy)) ^
                    (std::uint64_t(k) << 60);
  h ^= h >> 33, h *= 0xff51afd7ed558ccdULL, h ^= h >> 33, h *= 0xc4ceb9fe1a85ec53ULL, h ^= h >> 33;  // murmur3's finaliser
  return double(h >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace

SampleSlide::SampleSlide(int width, int height, std::uint32_t seed) : width_(width), height_(height), seed_(seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(0, 1);
  // Tissue islands: each a blob whose radius wobbles with angle.
  for (int i = 0; i < 4; ++i)
    blobs_.push_back({(0.2 + 0.6 * u(gen)) * width, (0.2 + 0.6 * u(gen)) * height,
                      (0.12 + 0.12 * u(gen)) * std::min(width, height), 6.28 * u(gen), 6.28 * u(gen)});
}

bool SampleSlide::inside(double x, double y) const {
  for (const auto& b : blobs_) {
    const double dx = x - b.cx, dy = y - b.cy, d2 = dx * dx + dy * dy;
    if (d2 > b.r * b.r * 1.3924) continue;  // beyond the largest wobble, (1 + 0.25 + 0.12)^2 r^2
    const double a = std::atan2(dy, dx);
    const double r = b.r * (1 + 0.25 * std::sin(3 * a + b.phase1) + 0.12 * std::sin(7 * a + b.phase2));
    if (d2 < r * r) return true;
  }
  return false;
}

// Small dark discs on a jittered grid, kept where their centre is in tissue.
bool SampleSlide::nucleus(int x, int y) const {
  for (int gy = (y - kRadius) / kCell; gy <= (y + kRadius) / kCell; ++gy)
    for (int gx = (x - kRadius) / kCell; gx <= (x + kRadius) / kCell; ++gx) {
      if (gx < 0 || gy < 0 || cell_uniform(seed_, gx, gy, 0) >= 0.45) continue;
      const int nx = gx * kCell + int(cell_uniform(seed_, gx, gy, 1) * kCell), ny = gy * kCell + int(cell_uniform(seed_, gx, gy, 2) * kCell);
      if ((x - nx) * (x - nx) + (y - ny) * (y - ny) <= kRadius * kRadius && inside(nx, ny)) return true;
    }
  return false;
}

void SampleSlide::render(int scale, int x0, int y0, int w, int h, std::uint8_t* rgb) const {
  for (int j = 0; j < h; ++j)
    for (int i = 0; i < w; ++i) {
      const int x = (x0 + i) * scale + scale / 2, y = (y0 + j) * scale + scale / 2;
      std::uint8_t* p = rgb + (std::size_t(j) * w + i) * 3;
      // Smooth stain variation keeps tiles compressible yet not flat.
      const double v = 0.5 + 0.25 * std::sin(x * 0.013 + y * 0.007) + 0.25 * std::sin(x * 0.004 - y * 0.011);
      if (!inside(x, y)) {
        p[0] = p[1] = p[2] = static_cast<std::uint8_t>(240 + 8 * v);  // glass
      } else if (nucleus(x, y)) {
        p[0] = static_cast<std::uint8_t>(70 + 30 * v);
        p[1] = static_cast<std::uint8_t>(50 + 20 * v);
        p[2] = static_cast<std::uint8_t>(140 + 30 * v);
      } else {
        p[0] = static_cast<std::uint8_t>(215 + 25 * v);
        p[1] = static_cast<std::uint8_t>(130 + 40 * v);
        p[2] = static_cast<std::uint8_t>(180 + 25 * v);
      }
    }
}

RgbImage make_sample_slide_image(int width, int height, std::uint32_t seed) {
  RgbImage img(width, height);
  SampleSlide(width, height, seed).render(1, 0, 0, width, height, img.rgb.data());
  return img;
}

}  // namespace tessera::io
