// Surgical phase annotations at the video's frame rate brought to the rate of
// `tessera video`'s embeddings (one label per second). Read: Cholec80's
// videoXX-phase.txt (tab-separated, header `Frame<TAB>Phase`, one row per
// frame at 25 fps, phase names) and the same as a CSV `frame,phase`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::train {

// True when the file's header names a `frame` column (any case): a frame-level annotation.
bool is_frame_annotation(const std::string& path);

// One class index per frame. Rows hold frames 0, 1, 2 ... in order; a phase is a name in `classes`
// or its index. Throws naming the file and line on an unknown phase, a frame out of sequence or a short row.
std::vector<int64_t> read_frame_phases(const std::string& path, const std::vector<std::string>& classes);

// Second s gets the phase held by most of its frames (those with floor(frame / fps) == s; the last
// second may have fewer), ties going to the phase that came first in the second. Needs fps >= 1.
std::vector<int64_t> majority_per_second(const std::vector<int64_t>& frame_phases, double fps);

// The labels of the embedded `seconds` (increasing) from the per-second labels of `labels_path`. The
// ends may differ by a ragged second (a frame more or less annotated than decoded): an embedded last
// second one past the labels is left out (the result is then one shorter than `seconds`), and labels
// up to one embedding step past the last embedded second are unused. Anything further apart throws
// naming both files: it is another video's annotation or the wrong frame rate.
std::vector<int64_t> labels_at_seconds(const std::vector<int64_t>& per_second, const std::vector<int64_t>& seconds,
                                       const std::string& labels_path, const std::string& features_path);

}  // namespace tessera::train
