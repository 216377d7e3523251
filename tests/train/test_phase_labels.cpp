// Frame-level phase annotations (Cholec80's videoXX-phase.txt and a CSV
// frame,phase): reading with errors naming file and line, 25 fps -> one label
// per second by majority (boundaries, ties, a ragged last second), and the
// alignment with the embedded seconds of a video.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/train/phase_labels.h"
#include "../error_of.h"
#include "train_test_util.h"

namespace tessera::train {
namespace {

using test_support::error_of;
using testing::temp_dir;
using testing::write_file;
using V = std::vector<int64_t>;

const std::vector<std::string> kPhases = {"Preparation", "CalotTriangleDissection", "ClippingCutting"};

// Frame rows "Frame<TAB>Phase" for the given phase of each frame.
std::string cholec80(const V& phases) {
  std::string s = "Frame\tPhase\r\n";
  for (size_t f = 0; f < phases.size(); ++f) s += std::to_string(f) + "\t" + kPhases[size_t(phases[f])] + "\r\n";
  return s;
}

V repeat(const std::vector<std::pair<int64_t, int>>& runs) {
  V v;
  for (const auto& [phase, n] : runs) v.insert(v.end(), size_t(n), phase);
  return v;
}

TEST(PhaseLabels, ReadsCholec80AndCsv) {
  const auto dir = temp_dir("phase_read");
  const auto txt = write_file(dir + "/video01-phase.txt", cholec80({0, 0, 1, 2, 2}));
  EXPECT_TRUE(is_frame_annotation(txt));
  EXPECT_EQ(read_frame_phases(txt, kPhases), (V{0, 0, 1, 2, 2}));
  const auto csv = write_file(dir + "/v.csv", "frame,phase\n0,Preparation\n\n1,2\n");  // a blank line; an index for a name
  EXPECT_TRUE(is_frame_annotation(csv));
  EXPECT_EQ(read_frame_phases(csv, kPhases), (V{0, 2}));
  EXPECT_FALSE(is_frame_annotation(write_file(dir + "/per_second.csv", "second,phase_id,phase\n0,0,Preparation\n")));
}

TEST(PhaseLabels, BadAnnotationsNameFileAndLine) {
  const auto dir = temp_dir("phase_bad");
  const auto unknown = write_file(dir + "/u-phase.txt", "Frame\tPhase\n0\tPreparation\n1\tGallbladderRetraction\n");
  EXPECT_NE(error_of([&] { read_frame_phases(unknown, kPhases); }).find("u-phase.txt line 3: label `GallbladderRetraction`"),
            std::string::npos);
  const auto gap = write_file(dir + "/g-phase.txt", "Frame\tPhase\n0\tPreparation\n2\tPreparation\n");
  EXPECT_NE(error_of([&] { read_frame_phases(gap, kPhases); }).find("g-phase.txt line 3: frame `2` where 1 was due"), std::string::npos);
  const auto shortrow = write_file(dir + "/s-phase.txt", "Frame\tPhase\n0\n");
  EXPECT_NE(error_of([&] { read_frame_phases(shortrow, kPhases); }).find("s-phase.txt line 2: fewer cells"), std::string::npos);
  const auto header = write_file(dir + "/h.txt", "Frame\tStep\n0\tPreparation\n");
  EXPECT_NE(error_of([&] { read_frame_phases(header, kPhases); }).find("h.txt: a phase annotation's header names columns Frame and Phase"),
            std::string::npos);
  const auto empty = write_file(dir + "/e.txt", "Frame\tPhase\n");
  EXPECT_NE(error_of([&] { read_frame_phases(empty, kPhases); }).find("e.txt: no frames"), std::string::npos);
}

TEST(PhaseLabels, MajorityPerSecondAt25Fps) {
  // Second 0: 13 frames of 0 then 12 of 1 -> 0; second 1: 12 of 1, 13 of 2 -> 2; second 2 all 2;
  // a ragged last second of 3 frames: 1 of 2, 2 of 0 -> 0.
  const V frames = repeat({{0, 13}, {1, 24}, {2, 13 + 25 + 1}, {0, 2}});
  ASSERT_EQ(frames.size(), 78u);
  EXPECT_EQ(majority_per_second(frames, 25), (V{0, 2, 2, 0}));
  // Frame 24 closes second 0 and frame 25 opens second 1.
  EXPECT_EQ(majority_per_second(repeat({{1, 25}, {0, 25}}), 25), (V{1, 0}));
  // A tie goes to the phase that came first in the second, whatever its index.
  EXPECT_EQ(majority_per_second({1, 1, 0, 0, 2, 0, 0, 2}, 4), (V{1, 2}));
  // 29.97 fps: frame 29 (0.968 s) is in second 0, where it ties 15 to 15 (without it, phase 1 would win).
  EXPECT_EQ(majority_per_second(repeat({{0, 14}, {1, 15}, {0, 1}, {1, 30}}), 29.97), (V{0, 1}));
  EXPECT_THROW(majority_per_second({0, 1}, 0.5), std::invalid_argument);
}

TEST(PhaseLabels, AlignsWithEmbeddedSeconds) {
  const V labels = {0, 0, 1, 1, 2, 2};
  EXPECT_EQ(labels_at_seconds(labels, {0, 1, 2, 3, 4, 5}, "l.txt", "e.st"), labels);
  // The video decodes one ragged second more than was annotated: it is left out.
  EXPECT_EQ(labels_at_seconds(labels, {0, 1, 2, 3, 4, 5, 6}, "l.txt", "e.st"), labels);
  // One annotated second more than decoded: unused.
  EXPECT_EQ(labels_at_seconds(labels, {0, 1, 2, 3, 4}, "l.txt", "e.st"), (V{0, 0, 1, 1, 2}));
  // Sampled every 2 s: the labels may run one step past the last embedding.
  EXPECT_EQ(labels_at_seconds(labels, {0, 2, 4}, "l.txt", "e.st"), (V{0, 1, 2}));
  const std::string too_long = error_of([&] { labels_at_seconds(labels, {0, 1, 2, 3, 4, 5, 6, 7}, "l.txt", "e.st"); });
  EXPECT_NE(too_long.find("l.txt: labels cover seconds 0..5 but e.st holds second 6"), std::string::npos) << too_long;
  const std::string too_short = error_of([&] { labels_at_seconds(labels, {0, 1, 2, 3}, "l.txt", "e.st"); });
  EXPECT_NE(too_short.find("l.txt: labels cover seconds 0..5 but e.st ends at second 3"), std::string::npos) << too_short;
  EXPECT_NE(error_of([&] { labels_at_seconds(labels, {0, 2, 1}, "l.txt", "e.st"); }).find("e.st: seconds are not increasing"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera::train
