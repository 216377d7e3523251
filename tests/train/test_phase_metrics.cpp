// Surgical-phase metrics against values worked out by hand: per video
// precision, recall and Jaccard (a phase absent from a video's truth has none;
// a phase never predicted has precision 0), per-phase means over the videos
// holding the phase, means and sample deviations over phases, accuracy over videos.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "tessera/train/phase_metrics.h"

namespace tessera::train {
namespace {

constexpr int64_t kPhases = 5;  // phase 4 is in neither video

// Video A: truth 0 0 0 1 1 2, prediction 0 0 1 1 3 0.
//   phase 0: 3 true, 3 predicted, 2 hits -> P 2/3, R 2/3, J 2/4
//   phase 1: 2 true, 2 predicted, 1 hit  -> P 1/2, R 1/2, J 1/3
//   phase 2: 1 true, never predicted      -> P 0, R 0, J 0
//   phase 3: not in the truth (its false positive cost phase 1 a hit) -> none; accuracy 3/6
VideoPhaseScores video_a() { return score_video({0, 0, 1, 1, 3, 0}, {0, 0, 0, 1, 1, 2}, kPhases); }
// Video B: truth 3 3 2 2, prediction 3 3 2 3.
//   phase 3: 2 true, 3 predicted, 2 hits -> P 2/3, R 1, J 2/3
//   phase 2: 2 true, 1 predicted, 1 hit  -> P 1, R 1/2, J 1/2; accuracy 3/4
VideoPhaseScores video_b() { return score_video({3, 3, 2, 3}, {3, 3, 2, 2}, kPhases); }

void expect_values(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    if (std::isnan(want[k])) EXPECT_TRUE(std::isnan(got[k])) << "phase " << k << ": " << got[k];
    else EXPECT_NEAR(got[k], want[k], 1e-12) << "phase " << k;
  }
}

const double N = std::nan("");

TEST(PhaseMetrics, OneVideo) {
  const VideoPhaseScores a = video_a();
  expect_values(a.precision, {2. / 3, 1. / 2, 0, N, N});
  expect_values(a.recall, {2. / 3, 1. / 2, 0, N, N});
  expect_values(a.jaccard, {2. / 4, 1. / 3, 0, N, N});
  EXPECT_DOUBLE_EQ(a.accuracy, 0.5);
  EXPECT_EQ(a.seconds, 6);
  const VideoPhaseScores b = video_b();
  expect_values(b.precision, {N, N, 1, 2. / 3, N});
  expect_values(b.recall, {N, N, 1. / 2, 1, N});
  expect_values(b.jaccard, {N, N, 1. / 2, 2. / 3, N});
  EXPECT_DOUBLE_EQ(b.accuracy, 0.75);
}

TEST(PhaseMetrics, PerVideoThenOverVideos) {
  const PhaseMetrics m = average_videos({video_a(), video_b()});
  expect_values(m.precision.per_phase, {2. / 3, 1. / 2, (0 + 1) / 2., 2. / 3, N});
  expect_values(m.recall.per_phase, {2. / 3, 1. / 2, (0 + 1. / 2) / 2, 1, N});
  expect_values(m.jaccard.per_phase, {2. / 4, 1. / 3, (0 + 1. / 2) / 2, 2. / 3, N});
  // Means over the four phases that occur; sample deviations over them.
  EXPECT_NEAR(m.precision.mean, 7. / 12, 1e-12);
  EXPECT_NEAR(m.precision.std, std::sqrt(4 * (1. / 144) / 3), 1e-12);  // every value is 1/12 from the mean
  EXPECT_NEAR(m.recall.mean, (2. / 3 + 1. / 2 + 1. / 4 + 1) / 4, 1e-12);
  EXPECT_NEAR(m.jaccard.mean, (1. / 2 + 1. / 3 + 1. / 4 + 2. / 3) / 4, 1e-12);
  EXPECT_NEAR(m.accuracy, 0.625, 1e-12);
  EXPECT_NEAR(m.accuracy_std, std::sqrt(2 * 0.125 * 0.125), 1e-12);
  EXPECT_EQ(m.videos, 2);
  EXPECT_EQ(m.seconds, 10);

  const nlohmann::json j = phase_metrics_json(m, {"p0", "p1", "p2", "p3", "p4"});
  EXPECT_TRUE(j["jaccard"]["per_phase"]["p4"].is_null());
  EXPECT_NEAR(j["jaccard"]["per_phase"]["p2"].get<double>(), 0.25, 1e-12);
  EXPECT_NEAR(j["precision"]["mean"].get<double>(), 7. / 12, 1e-12);
  EXPECT_NEAR(j["accuracy"]["mean"].get<double>(), 0.625, 1e-12);
  EXPECT_EQ(j["videos"].get<int>(), 2);
  // One video: no deviation over videos.
  EXPECT_TRUE(phase_metrics_json(average_videos({video_a()}), {})["accuracy"]["std"].is_null());
}

TEST(PhaseMetrics, RejectsMismatchedInput) {
  EXPECT_THROW(score_video({0, 1}, {0}, 2), std::invalid_argument);
  EXPECT_THROW(score_video({0, 2}, {0, 1}, 2), std::invalid_argument);
  EXPECT_THROW(average_videos({}), std::invalid_argument);
}

}  // namespace
}  // namespace tessera::train
