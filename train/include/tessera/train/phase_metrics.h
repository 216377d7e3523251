// Surgical phase recognition metrics as the Cholec80 papers report them
// (Twinanda et al.'s Matlab evaluation, shipped by TMRNet and later papers):
// per video and phase, precision, recall and Jaccard over its seconds; each
// phase's mean over the videos whose ground truth holds it; the mean and
// standard deviation of those over phases; accuracy per video, averaged over
// videos. Boundaries are strict (no 10-second relaxed margin at transitions).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessera::train {

// One video. A phase absent from its ground truth has no precision, recall or Jaccard (NaN), as in
// the Cholec80 script; its false positives still cost the true phases their recall. A phase in the
// ground truth but never predicted has precision 0 (the script leaves it NaN: a missed phase is a failure).
struct VideoPhaseScores {
  std::vector<double> precision, recall, jaccard;  // per phase, in [0, 1] or NaN
  double accuracy = 0;
  int64_t seconds = 0;
};

// `pred` and `truth`: a phase index per second, of the same length; indices below num_phases.
VideoPhaseScores score_video(const std::vector<int64_t>& pred, const std::vector<int64_t>& truth, int64_t num_phases);

struct PhaseMetric {
  std::vector<double> per_phase;  // mean over the videos holding the phase; NaN when none does
  double mean = 0, std = 0;       // over the phases with a value; std is the sample one (NaN below two)
};

struct PhaseMetrics {
  PhaseMetric precision, recall, jaccard;
  double accuracy = 0, accuracy_std = 0;  // over videos (sample std, NaN for one video)
  int64_t videos = 0, seconds = 0;
};

PhaseMetrics average_videos(const std::vector<VideoPhaseScores>& videos);

// {"videos", "seconds", "accuracy": {mean, std}, "precision"|"recall"|"jaccard": {mean, std, per_phase: {name: value}}};
// NaN is written as null.
nlohmann::json phase_metrics_json(const PhaseMetrics& m, const std::vector<std::string>& names);

}  // namespace tessera::train
