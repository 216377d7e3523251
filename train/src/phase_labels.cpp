#include "tessera/train/phase_labels.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include "class_index.h"
#include "csv_rows.h"

namespace tessera::train {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// Cholec80's files are tab-separated; anything else is read as a CSV.
char separator_of(const std::string& header) { return header.find('\t') != std::string::npos ? '\t' : ','; }

int column(const std::vector<std::string>& header, const std::string& name) {
  for (size_t i = 0; i < header.size(); ++i)
    if (lower(header[i]) == name) return int(i);
  return -1;
}

bool blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

}  // namespace

bool is_frame_annotation(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::string line;
  std::getline(in, line);
  return column(split_cells(line, separator_of(line)), "frame") >= 0;
}

std::vector<int64_t> read_frame_phases(const std::string& path, const std::vector<std::string>& classes) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::string line;
  if (!std::getline(in, line)) throw std::runtime_error(path + ": empty file");
  const char sep = separator_of(line);
  const auto header = split_cells(line, sep);
  const int fc = column(header, "frame"), pc = column(header, "phase");
  if (fc < 0 || pc < 0)
    throw std::runtime_error(path + ": a phase annotation's header names columns Frame and Phase (tab- or comma-separated)");
  std::vector<int64_t> phases;
  for (int64_t n = 2; std::getline(in, line); ++n) {
    if (blank(line)) continue;
    const std::string where = path + " line " + std::to_string(n);
    const auto cells = split_cells(line, sep);
    if (int(cells.size()) <= std::max(fc, pc)) throw std::runtime_error(where + ": fewer cells than the header");
    const std::string expected = std::to_string(phases.size());
    if (cells[fc] != expected)
      throw std::runtime_error(where + ": frame `" + cells[fc] + "` where " + expected + " was due (one row per frame, from 0)");
    phases.push_back(class_index(cells[pc], classes, where));
  }
  if (phases.empty()) throw std::runtime_error(path + ": no frames");
  return phases;
}

std::vector<int64_t> majority_per_second(const std::vector<int64_t>& frame_phases, double fps) {
  if (!(fps >= 1)) throw std::invalid_argument("majority_per_second: fps must be at least 1, got " + std::to_string(fps));
  std::vector<int64_t> out;
  std::vector<std::pair<int64_t, int64_t>> counts;  // (phase, frames) in order of first appearance in the second
  auto close = [&] {
    auto best = counts.begin();
    for (auto it = counts.begin(); it != counts.end(); ++it)
      if (it->second > best->second) best = it;
    out.push_back(best->first);
    counts.clear();
  };
  for (size_t f = 0; f < frame_phases.size(); ++f) {
    // The epsilon keeps frame 50 at 25 fps in second 2 whatever the rounding of 50 / 25.
    const auto second = int64_t(std::floor(double(f) / fps + 1e-9));
    if (second > int64_t(out.size())) close();
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == frame_phases[f]; });
    if (it == counts.end()) counts.emplace_back(frame_phases[f], 1);
    else ++it->second;
  }
  if (!counts.empty()) close();
  return out;
}

std::vector<int64_t> labels_at_seconds(const std::vector<int64_t>& per_second, const std::vector<int64_t>& seconds,
                                       const std::string& labels_path, const std::string& features_path) {
  const auto labelled = int64_t(per_second.size());
  auto mismatch = [&](const std::string& what) {
    return std::runtime_error(labels_path + ": labels cover seconds 0.." + std::to_string(labelled - 1) + " but " + features_path +
                              " " + what + ": not this video's annotation, or not at its frame rate (label_fps)");
  };
  int64_t step = 1;  // between embedded seconds (> 1 when the video was sampled below 1 fps)
  std::vector<int64_t> out;
  for (size_t i = 0; i < seconds.size(); ++i) {
    const int64_t s = seconds[i];
    if (i > 0 && s <= seconds[i - 1]) throw std::runtime_error(features_path + ": seconds are not increasing");
    if (i == 1 || (i > 1 && s - seconds[i - 1] < step)) step = s - seconds[i - 1];
    if (s < 0) throw std::runtime_error(features_path + ": negative second " + std::to_string(s));
    if (s < labelled) out.push_back(per_second[size_t(s)]);
    else if (!(i + 1 == seconds.size() && s == labelled)) throw mismatch("holds second " + std::to_string(s));
  }
  if (out.empty()) throw mismatch("holds no second among them");
  if (labelled - 1 > seconds.back() + step) throw mismatch("ends at second " + std::to_string(seconds.back()));
  return out;
}

}  // namespace tessera::train
