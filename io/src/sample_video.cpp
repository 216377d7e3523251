#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <vector>

#include "parallel_for.h"
#include "tessera/io/atomic_file.h"
#include "tessera/io/samples.h"
#include "tessera/io/video.h"

namespace tessera::io {
namespace {

struct Phase {
  const char* name;
  int instruments;  // how many tools are in view
};
// Four phases of equal length, loosely after laparoscopic cholecystectomy.
const Phase kPhases[] = {{"preparation", 1}, {"dissection", 2}, {"clipping_cutting", 3}, {"retraction", 1}};

// A straight instrument shaft: the pixels within `half_width` of the segment
// from the frame edge point (x0, y0) to the tip (x1, y1).
void draw_shaft(RgbImage& f, double x0, double y0, double x1, double y1, double half_width, std::uint8_t grey) {
  const double dx = x1 - x0, dy = y1 - y0, len2 = dx * dx + dy * dy;
  // Only the segment's bounding box, widened by the half width, can be within reach.
  const int xa = std::max(0, int(std::floor(std::min(x0, x1) - half_width))), xb = std::min(f.width - 1, int(std::ceil(std::max(x0, x1) + half_width)));
  const int ya = std::max(0, int(std::floor(std::min(y0, y1) - half_width))), yb = std::min(f.height - 1, int(std::ceil(std::max(y0, y1) + half_width)));
  for (int y = ya; y <= yb; ++y)
    for (int x = xa; x <= xb; ++x) {
      const double t = std::max(0.0, std::min(1.0, ((x - x0) * dx + (y - y0) * dy) / len2));
      const double px = x0 + t * dx - x, py = y0 + t * dy - y;
      if (px * px + py * py <= half_width * half_width) {
        auto* p = f.pixel(x, y);
        // A little shading across the shaft makes it look round.
        const auto shade = static_cast<std::uint8_t>(grey - 40 * std::sqrt(px * px + py * py) / half_width);
        p[0] = p[1] = p[2] = shade;
      }
    }
}

}  // namespace

Table write_sample_video(const std::string& path, const SampleVideoOptions& options) {
  SampleVideoOptions o = options;
  const bool repeated = o.segment_seconds > 0 && o.segment_seconds < o.seconds;
  if (repeated && o.seconds % o.segment_seconds)
    throw std::invalid_argument(path + ": the video's length must be a whole number of segments");
  const int total = o.seconds;
  if (repeated) o.seconds = o.segment_seconds;
  const std::string segment = repeated ? path + ".segment" + full_extension(path) : path;
  VideoWriteOptions wo;
  wo.width = o.width;
  wo.height = o.height;
  wo.fps = o.fps;
  wo.codec = o.codec;
  VideoWriter writer(segment, wo);
  std::mt19937 gen(o.seed);
  std::uniform_real_distribution<double> u(0, 1);
  // Tissue texture: a few random sinusoids, sampled with a slow drift (camera motion).
  double fx[6], fy[6], ph[6];
  for (int i = 0; i < 6; ++i) fx[i] = 0.01 + 0.05 * u(gen), fy[i] = 0.01 + 0.05 * u(gen), ph[i] = 6.28 * u(gen);
  Table labels;
  labels.columns = {"second", "phase_id", "phase"};
  const int n_phases = 4;
  const int threads = detail::io_threads();
  RgbImage frame(o.width, o.height);
  for (int i = 0; i < o.seconds * o.fps; ++i) {
    const double t = static_cast<double>(i) / o.fps;
    const int second = i / o.fps;
    const int phase = std::min(n_phases - 1, second * n_phases / std::max(1, o.seconds));
    if (i % o.fps == 0) labels.add_row({std::int64_t{second}, std::int64_t{phase}, std::string(kPhases[phase].name)});
    const double ox = 20 * t, oy = 8 * std::sin(0.5 * t);
    auto rows = [&](int y0, int y1) {
      for (int y = y0; y < y1; ++y)
        for (int x = 0; x < o.width; ++x) {
          double v = 0;
          for (int k = 0; k < 6; ++k) v += std::sin((x + ox) * fx[k] + (y + oy) * fy[k] + ph[k]);
          v = 0.5 + v / 12;  // 0..1
          // Vignette: endoscopes see a bright centre and dark corners.
          const double cx = (x - o.width / 2.0) / o.width, cy = (y - o.height / 2.0) / o.height;
          const double light = std::max(0.15, 1 - 2.2 * (cx * cx + cy * cy));
          auto* p = frame.pixel(x, y);
          p[0] = static_cast<std::uint8_t>(light * (150 + 90 * v));
          p[1] = static_cast<std::uint8_t>(light * (40 + 50 * v));
          p[2] = static_cast<std::uint8_t>(light * (40 + 40 * v));
        }
    };
    if (threads == 1 || o.height < 64) {
      rows(0, o.height);
    } else {  // bands of rows: an hour at 1080p is 100k frames
      detail::parallel_for(threads, threads, [&](size_t k) { rows(o.height * int(k) / threads, o.height * int(k + 1) / threads); });
    }
    for (int k = 0; k < kPhases[phase].instruments; ++k) {
      // Each tool enters from its own edge point and its tip circles slowly.
      const double ex = k == 1 ? o.width : (k == 2 ? o.width * 0.5 : 0);
      const double ey = k == 2 ? 0 : o.height;
      const double tx = o.width * (0.5 + 0.2 * std::cos(0.9 * t + 2 * k));
      const double ty = o.height * (0.5 + 0.2 * std::sin(1.3 * t + k));
      draw_shaft(frame, ex, ey, tx, ty, 0.03 * o.width, static_cast<std::uint8_t>(200 - 20 * k));
    }
    writer.add_frame(frame);
  }
  writer.finish();
  if (!repeated) return labels;
  struct Remove {
    std::string p;
    ~Remove() { std::remove(p.c_str()); }
  } remove_segment{segment};
  const int copies = total / o.segment_seconds;
  repeat_video(segment, path, copies);
  Table all;
  all.columns = labels.columns;
  for (int c = 0; c < copies; ++c)
    for (const auto& row : labels.rows) {
      auto r = row;
      r[0] = std::get<std::int64_t>(row[0]) + std::int64_t{c} * o.segment_seconds;
      all.add_row(r);
    }
  return all;
}

}  // namespace tessera::io
