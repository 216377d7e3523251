#include "tessera/train/phase_metrics.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <tuple>

namespace tessera::train {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Mean and sample standard deviation of the values that are not NaN.
std::pair<double, double> mean_std(const std::vector<double>& v) {
  double sum = 0, n = 0;
  for (double x : v)
    if (!std::isnan(x)) sum += x, n += 1;
  if (n == 0) return {kNaN, kNaN};
  const double mean = sum / n;
  double sq = 0;
  for (double x : v)
    if (!std::isnan(x)) sq += (x - mean) * (x - mean);
  return {mean, n > 1 ? std::sqrt(sq / (n - 1)) : kNaN};
}

PhaseMetric average(const std::vector<VideoPhaseScores>& videos, std::vector<double> VideoPhaseScores::*field) {
  PhaseMetric m;
  for (size_t k = 0; k < (videos.front().*field).size(); ++k) {
    std::vector<double> over_videos;
    for (const auto& v : videos) over_videos.push_back((v.*field)[k]);
    m.per_phase.push_back(mean_std(over_videos).first);
  }
  std::tie(m.mean, m.std) = mean_std(m.per_phase);
  return m;
}

nlohmann::json number(double x) { return std::isnan(x) ? nlohmann::json(nullptr) : nlohmann::json(x); }

}  // namespace

VideoPhaseScores score_video(const std::vector<int64_t>& pred, const std::vector<int64_t>& truth, int64_t num_phases) {
  if (pred.size() != truth.size() || pred.empty())
    throw std::invalid_argument("score_video: " + std::to_string(pred.size()) + " predictions for " + std::to_string(truth.size()) +
                                " labelled seconds");
  std::vector<double> hit(size_t(num_phases), 0), predicted(size_t(num_phases), 0), present(size_t(num_phases), 0);
  double correct = 0;
  for (size_t i = 0; i < pred.size(); ++i) {
    if (pred[i] < 0 || pred[i] >= num_phases || truth[i] < 0 || truth[i] >= num_phases)
      throw std::invalid_argument("score_video: a phase index outside 0.." + std::to_string(num_phases - 1));
    predicted[size_t(pred[i])] += 1;
    present[size_t(truth[i])] += 1;
    if (pred[i] == truth[i]) hit[size_t(pred[i])] += 1, correct += 1;
  }
  VideoPhaseScores s;
  s.seconds = int64_t(pred.size());
  s.accuracy = correct / double(pred.size());
  for (size_t k = 0; k < size_t(num_phases); ++k) {
    const bool in_truth = present[k] > 0;
    s.precision.push_back(!in_truth ? kNaN : predicted[k] > 0 ? hit[k] / predicted[k] : 0.0);
    s.recall.push_back(in_truth ? hit[k] / present[k] : kNaN);
    s.jaccard.push_back(in_truth ? hit[k] / (predicted[k] + present[k] - hit[k]) : kNaN);
  }
  return s;
}

PhaseMetrics average_videos(const std::vector<VideoPhaseScores>& videos) {
  if (videos.empty()) throw std::invalid_argument("average_videos: no videos");
  PhaseMetrics m;
  m.precision = average(videos, &VideoPhaseScores::precision);
  m.recall = average(videos, &VideoPhaseScores::recall);
  m.jaccard = average(videos, &VideoPhaseScores::jaccard);
  std::vector<double> acc;
  for (const auto& v : videos) acc.push_back(v.accuracy), m.seconds += v.seconds;
  std::tie(m.accuracy, m.accuracy_std) = mean_std(acc);
  m.videos = int64_t(videos.size());
  return m;
}

nlohmann::json phase_metrics_json(const PhaseMetrics& m, const std::vector<std::string>& names) {
  nlohmann::json j = {{"videos", m.videos}, {"seconds", m.seconds},
                      {"accuracy", {{"mean", number(m.accuracy)}, {"std", number(m.accuracy_std)}}}};
  for (const auto& [key, metric] : {std::make_pair("precision", &m.precision), std::make_pair("recall", &m.recall),
                                    std::make_pair("jaccard", &m.jaccard)}) {
    nlohmann::json per = nlohmann::json::object();
    for (size_t k = 0; k < metric->per_phase.size(); ++k)
      per[k < names.size() ? names[k] : std::to_string(k)] = number(metric->per_phase[k]);
    j[key] = {{"mean", number(metric->mean)}, {"std", number(metric->std)}, {"per_phase", per}};
  }
  return j;
}

}  // namespace tessera::train
