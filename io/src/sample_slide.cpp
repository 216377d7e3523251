#include <cmath>
#include <random>
#include <vector>

#include "tessera/io/samples.h"

namespace tessera::io {

RgbImage make_sample_slide_image(int width, int height, std::uint32_t seed) {
  RgbImage img(width, height);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(0, 1);
  // Tissue islands: each a blob whose radius wobbles with angle.
  struct Blob {
    double cx, cy, r, phase1, phase2;
  };
  std::vector<Blob> blobs;
  for (int i = 0; i < 4; ++i)
    blobs.push_back({(0.2 + 0.6 * u(gen)) * width, (0.2 + 0.6 * u(gen)) * height,
                     (0.12 + 0.12 * u(gen)) * std::min(width, height), 6.28 * u(gen), 6.28 * u(gen)});
  auto inside = [&](double x, double y) {
    for (const auto& b : blobs) {
      const double dx = x - b.cx, dy = y - b.cy;
      const double a = std::atan2(dy, dx);
      const double r = b.r * (1 + 0.25 * std::sin(3 * a + b.phase1) + 0.12 * std::sin(7 * a + b.phase2));
      if (dx * dx + dy * dy < r * r) return true;
    }
    return false;
  };
  // Nuclei: small dark discs placed on a jittered grid, kept if in tissue.
  const int cell = 14;
  std::vector<std::pair<int, int>> nuclei;
  for (int gy = 0; gy < height; gy += cell)
    for (int gx = 0; gx < width; gx += cell) {
      const int x = gx + static_cast<int>(u(gen) * cell), y = gy + static_cast<int>(u(gen) * cell);
      if (u(gen) < 0.45 && inside(x, y)) nuclei.emplace_back(x, y);
    }
  std::vector<std::uint8_t> is_nucleus(static_cast<std::size_t>(width) * height, 0);
  for (const auto& [nx, ny] : nuclei)
    for (int y = std::max(0, ny - 3); y <= std::min(height - 1, ny + 3); ++y)
      for (int x = std::max(0, nx - 3); x <= std::min(width - 1, nx + 3); ++x)
        if ((x - nx) * (x - nx) + (y - ny) * (y - ny) <= 9) is_nucleus[static_cast<std::size_t>(y) * width + x] = 1;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      auto* p = img.pixel(x, y);
      // Smooth stain variation keeps tiles compressible yet not flat.
      const double v = 0.5 + 0.25 * std::sin(x * 0.013 + y * 0.007) + 0.25 * std::sin(x * 0.004 - y * 0.011);
      if (!inside(x, y)) {
        p[0] = p[1] = p[2] = static_cast<std::uint8_t>(240 + 8 * v);  // glass
      } else if (is_nucleus[static_cast<std::size_t>(y) * width + x]) {
        p[0] = static_cast<std::uint8_t>(70 + 30 * v);
        p[1] = static_cast<std::uint8_t>(50 + 20 * v);
        p[2] = static_cast<std::uint8_t>(140 + 30 * v);
      } else {
        p[0] = static_cast<std::uint8_t>(215 + 25 * v);
        p[1] = static_cast<std::uint8_t>(130 + 40 * v);
        p[2] = static_cast<std::uint8_t>(180 + 25 * v);
      }
    }
  return img;
}

}  // namespace tessera::io
