#include "report_video.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "progress.h"
#include "report_page.h"

namespace tessera::apps::report {
namespace {

namespace fs = std::filesystem;

std::string lower_extension(const std::string& path) {
  std::string e = fs::path(path).extension().string();
  for (auto& c : e) c = char(std::tolower(static_cast<unsigned char>(c)));
  return e;
}

// Decodes every frame at its own timestamp and encodes it with libx264 into MP4 (yuv420p, even size).
void transcode_h264(const io::VideoInfo& info, const std::string& out, bool quiet) {
  io::VideoReadOptions ro;
  ro.width = info.width & ~1;
  ro.height = info.height & ~1;
  io::VideoReader reader(info.path, ro);
  io::VideoWriteOptions wo;
  wo.width = ro.width;
  wo.height = ro.height;
  const double rate = info.avg_frame_rate.value() > 0 ? info.avg_frame_rate.value() : 25.0;
  wo.fps = std::max(1, int(std::lround(rate)));
  wo.time_base_den = 90000;  // MPEG's clock: every source timestamp lands within 11 µs
  wo.bit_rate = std::max<int64_t>(500'000, int64_t(wo.width) * wo.height * 3);
  wo.codec = "libx264";
  wo.rotation_degrees = info.rotation_degrees;
  io::VideoWriter writer(out, wo);
  const int64_t expected = info.frame_count > 0 ? info.frame_count : int64_t(std::ceil(info.duration_s * rate));
  Progress bar("h264", std::max<int64_t>(1, expected), quiet);
  io::VideoFrame f;
  int64_t last = -1, n = 0;
  while (reader.next(f)) {
    const int64_t pts = std::max<int64_t>(last + 1, std::llround(f.time_s * wo.time_base_den));
    writer.add_frame(f.image, pts);
    last = pts;
    bar.update(++n);
  }
  writer.finish();
  bar.finish();
}

}  // namespace

bool browser_playable(const io::VideoInfo& info) {
  const std::string ext = lower_extension(info.path);
  if (ext == ".mp4" || ext == ".m4v") return info.codec == "h264" || info.codec == "av1" || info.codec == "vp9";
  if (ext == ".webm") return info.codec == "vp8" || info.codec == "vp9" || info.codec == "av1";
  return false;
}

void write_video_report(const std::string& page, const io::VideoInfo& info, double duration_s, const VideoTimeline& timeline,
                        bool quiet) {
  const bool playable = browser_playable(info);
  const std::string file = playable ? "video" + lower_extension(info.path) : "video.mp4";
  write_assets(page, [&](const std::string& dir) {
    const fs::path dst = fs::path(dir) / file;
    if (!playable) return transcode_h264(info, dst.string(), quiet);
    std::error_code ec;
    fs::create_hard_link(info.path, dst, ec);  // no copy of a long video where the file system allows
    if (ec) fs::copy_file(info.path, dst);
  });

  // Runs of equal labels (or single seconds when unlabelled) become the timeline's segments.
  nlohmann::json segments = nlohmann::json::array();
  std::map<std::string, std::pair<double, std::array<uint8_t, 3>>> per_phase;
  std::vector<std::string> order;  // phases as they first appear
  const bool labelled = !timeline.names.empty() && !timeline.names.front().empty();
  for (size_t i = 0; i < timeline.seconds.size(); ++i) {
    const double start = double(timeline.seconds[i]), end = std::min(duration_s > 0 ? duration_s : start + 1, start + 1);
    if (labelled) {
      if (!per_phase.count(timeline.names[i])) order.push_back(timeline.names[i]);
      auto& p = per_phase[timeline.names[i]];
      p.first += end - start;
      p.second = timeline.colors[i];
    }
    const auto& c = timeline.colors[i];
    if (labelled && !segments.empty() && segments.back()["name"] == timeline.names[i] && segments.back()["end"] == start) {
      segments.back()["end"] = end;
      continue;
    }
    segments.push_back({{"start", start}, {"end", end}, {"color", {c[0], c[1], c[2]}},
                        {"name", labelled ? nlohmann::json(timeline.names[i]) : nlohmann::json(nullptr)}});
  }
  double total = 0;
  for (const auto& [name, v] : per_phase) total += v.first;
  nlohmann::json phases = nlohmann::json::array();
  for (const auto& name : order) {
    const auto& v = per_phase[name];
    phases.push_back({{"name", name}, {"seconds", v.first}, {"fraction", total > 0 ? v.first / total : 0.0},
                      {"color", {v.second[0], v.second[1], v.second[2]}}});
  }
  const nlohmann::json data = {{"title", "tessera video: " + fs::path(info.path).filename().string()},
                               {"input", info.path},
                               {"video", assets_url(page) + file},
                               {"transcoded", !playable},
                               {"source_codec", info.codec},
                               {"duration_s", duration_s > 0 ? duration_s : double(timeline.seconds.size())},
                               {"segments", segments},
                               {"phases", phases}};
  write_page(page, "video", data);
}

}  // namespace tessera::apps::report
