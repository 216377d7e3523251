#include "report_segment.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

#include "report_page.h"
#include "tessera/io/volume_io.h"

namespace tessera::apps::report {
namespace {

namespace fs = std::filesystem;

// The volume as .nii.gz bytes, written through ITK (the page embeds them: nothing is fetched at view time).
std::string nifti_bytes(const io::Volume& v, const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("tessera-report-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path p = dir / (name + ".nii.gz");
  std::string bytes;
  try {
    io::write_volume(p.string(), v);
    std::ifstream f(p, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    bytes = s.str();
  } catch (...) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    throw;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return bytes;
}

// Per label, its voxel (i, j, k) nearest (in mm) to the label's centroid: a point inside it even when it is not convex.
std::map<int64_t, std::array<int64_t, 3>> inside_voxels(const io::Volume& labels) {
  const auto& g = labels.geometry;
  struct Acc { double x = 0, y = 0, z = 0; int64_t n = 0; double best = std::numeric_limits<double>::infinity(); std::array<int64_t, 3> at{}; };
  std::map<int64_t, Acc> acc;
  io::visit_pixels(labels, [&](const auto* p) {
    // Calls f(label, i, j, k, accumulator) for every labelled voxel.
    auto each = [&](auto&& f) {
      int64_t idx = 0;
      for (int64_t k = 0; k < g.size[2]; ++k)
        for (int64_t j = 0; j < g.size[1]; ++j)
          for (int64_t i = 0; i < g.size[0]; ++i, ++idx)
            if (const auto l = int64_t(p[idx]); l > 0) f(i, j, k, acc[l]);
    };
    each([](int64_t i, int64_t j, int64_t k, Acc& a) { a.x += double(i); a.y += double(j); a.z += double(k); ++a.n; });
    for (auto& [l, a] : acc) { a.x /= double(a.n); a.y /= double(a.n); a.z /= double(a.n); }
    each([&](int64_t i, int64_t j, int64_t k, Acc& a) {
      const double dx = (double(i) - a.x) * g.spacing[0], dy = (double(j) - a.y) * g.spacing[1], dz = (double(k) - a.z) * g.spacing[2];
      const double d = dx * dx + dy * dy + dz * dz;
      if (d < a.best) { a.best = d; a.at = {i, j, k}; }
    });
  });
  std::map<int64_t, std::array<int64_t, 3>> out;
  for (const auto& [l, a] : acc) out[l] = a.at;
  return out;
}

}  // namespace

void write_segment_report(const std::string& page, const io::Volume& image, const io::Volume& labels,
                          const nlohmann::json& summary, const std::optional<std::pair<double, double>>& window) {
  const auto inside = inside_voxels(labels);
  nlohmann::json legend = nlohmann::json::array();
  for (const auto& l : summary["labels"]) {
    const int64_t k = l["label"].get<int64_t>();
    if (k == 0) continue;
    const auto c = class_rgb(k - 1);
    nlohmann::json e = {{"label", k}, {"name", l["name"]}, {"color", {c[0], c[1], c[2]}}, {"voxels", l["voxels"]},
                        {"volume_ml", l["volume_ml"]}};
    if (l.contains("dice")) e["dice"] = l["dice"];
    const auto it = inside.find(k);
    e["inside_voxel"] = it != inside.end() ? nlohmann::json(it->second) : nlohmann::json(nullptr);
    legend.push_back(e);
  }
  nlohmann::json data = {{"title", "tessera segment: " + fs::path(summary["input"].get<std::string>()).filename().string()},
                         {"input", summary["input"]}, {"output", summary["output"]},
                         {"size", summary["size"]}, {"spacing_mm", summary["spacing_mm"]}, {"orientation", summary["orientation"]},
                         {"legend", legend}, {"opacity", 0.5},
                         {"image", base64(nifti_bytes(image, "image"))}, {"labels", base64(nifti_bytes(labels, "labels"))}};
  data["reference"] = summary.value("reference", "");
  data["window"] = window ? nlohmann::json({window->first, window->second}) : nlohmann::json(nullptr);
  write_page(page, "segment", data);
}

}  // namespace tessera::apps::report
