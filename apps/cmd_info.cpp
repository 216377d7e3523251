// `tessera info PATH [--json]`: what the io readers find in a volume, DICOM
// folder, whole-slide image or video. Errors (missing, empty, corrupt or
// mislabelled files) become one line naming the file and exit code 1.
#include <nlohmann/json.hpp>

#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "tessera/io/dicom_series.h"
#include "tessera/io/file_kind.h"
#include "tessera/io/orientation.h"
#include "tessera/io/slide.h"
#include "tessera/io/video.h"
#include "tessera/io/volume_io.h"

namespace tessera::apps {

namespace {

namespace tio = tessera::io;
// ordered_json keeps keys in the order written: kind and path first.
using json = nlohmann::ordered_json;

json vec3(const tio::Vec3& v) { return json::array({v[0], v[1], v[2]}); }

json volume_json(const tio::Volume& v) {
  const auto& g = v.geometry;
  json dir = json::array();
  for (const auto& row : g.direction) dir.push_back(vec3(row));
  const auto [lo, hi] = v.value_range();
  return {{"pixel_type", tio::pixel_type_name(v.pixel_type)},
          {"size", {g.size[0], g.size[1], g.size[2]}},
          {"spacing_mm", vec3(g.spacing)},
          {"origin_lps_mm", vec3(g.origin)},
          {"direction_lps", dir},
          {"orientation", tio::orientation_code(g.direction)},
          {"value_range", {lo, hi}}};
}

json dicom_json(const std::string& path, const std::string& series) {
  const auto all = tio::list_dicom_series(path);
  json j{{"kind", "dicom-folder"}, {"path", path}};
  json list = json::array();
  for (const auto& s : all)
    list.push_back({{"uid", s.uid}, {"files", s.files.size()}, {"description", s.description}, {"modality", s.modality}});
  j["series"] = list;
  // One series (or a chosen one): describe its volume too. Several: the list
  // is the answer, and `--series` picks one.
  if (all.size() == 1 || !series.empty()) j["volume"] = volume_json(tio::read_dicom_series(path, series));
  else if (all.empty()) throw std::runtime_error(path + ": folder holds no DICOM series");
  return j;
}

json slide_json(const std::string& path) {
  const tio::Slide slide(path);
  const auto& in = slide.info();
  json levels = json::array();
  for (std::size_t l = 0; l < in.levels.size(); ++l)
    levels.push_back({{"level", l},
                      {"width", in.levels[l].width},
                      {"height", in.levels[l].height},
                      {"downsample", in.levels[l].downsample},
                      {"mpp", slide.level_mpp(static_cast<int>(l))}});
  json assoc = json::array();
  for (const auto& a : in.associated) assoc.push_back(a);
  return {{"kind", "slide"},       {"path", path},           {"vendor", in.vendor},
          {"levels", levels},      {"mpp_x", in.mpp_x},       {"mpp_y", in.mpp_y},
          {"mpp_source", in.mpp_source}, {"objective_power", in.objective_power}, {"associated_images", assoc}};
}

json rational(const tio::Rational& r) { return {{"num", r.num}, {"den", r.den}, {"value", r.value()}}; }

json video_json(const std::string& path) {
  const tio::VideoInfo v = tio::probe_video(path);
  return {{"kind", "video"},
          {"path", path},
          {"container", v.container},
          {"codec", v.codec},
          {"width", v.width},
          {"height", v.height},
          {"duration_s", v.duration_s},
          {"frame_count", v.frame_count},
          {"avg_frame_rate", rational(v.avg_frame_rate)},
          {"real_frame_rate", rational(v.real_frame_rate)},
          {"time_base", rational(v.time_base)},
          {"rotation_degrees", v.rotation_degrees},
          {"streams", v.streams}};
}

json describe(const std::string& path, const std::string& series) {
  switch (tio::detect_file_kind(path)) {
    case tio::FileKind::kDicomFolder: return dicom_json(path, series);
    case tio::FileKind::kSlide: return slide_json(path);
    case tio::FileKind::kVideo: return video_json(path);
    case tio::FileKind::kVolume: break;
  }
  json j{{"kind", "volume"}, {"path", path}};
  j["volume"] = volume_json(tio::read_volume(path));
  return j;
}

// Text form: one "key: value" per line, nested objects indented, short
// arrays on one line; the JSON form carries the same content.
void print_text(const json& j, int indent = 0) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  for (const auto& [key, value] : j.items()) {
    const bool flat_array = value.is_array() && !value.empty() && !value.front().is_object() &&
                            !(value.front().is_array() && value.front().size() > 3);
    if (value.is_object()) {
      std::cout << pad << key << ":\n";
      print_text(value, indent + 2);
    } else if (value.is_array() && !flat_array && !value.empty() && value.front().is_object()) {
      std::cout << pad << key << ":\n";
      for (const auto& item : value) {
        std::cout << pad << "  -\n";
        print_text(item, indent + 4);
      }
    } else {
      std::cout << pad << key << ": " << (value.is_string() ? value.get<std::string>() : value.dump()) << "\n";
    }
  }
}

}  // namespace

void add_info(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("info", "Describe a volume, DICOM folder, whole-slide image or video");
  auto path = std::make_shared<std::string>();
  auto series = std::make_shared<std::string>();
  cmd->add_option("path", *path, "File or DICOM folder")->required();
  cmd->add_option("--series", *series, "DICOM series to describe when a folder holds several");
  auto* as_json = cmd->add_flag("--json", "Print one JSON object instead of text");
  cmd->callback([path, series, as_json, &exit_code] {
    const json j = describe(*path, *series);
    if (*as_json) std::cout << j.dump(2) << "\n";
    else print_text(j);
    exit_code = kOk;
  });
}

}  // namespace tessera::apps
