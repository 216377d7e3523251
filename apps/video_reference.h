// `tessera video --reference`: a video's labelled seconds scored against its
// phase annotation (Cholec80's videoXX-phase.txt, or a CSV frame,phase) with
// the surgical-phase metrics that training reports (train/phase_metrics.h).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/train/phase_metrics.h"

namespace tessera::apps {

struct PhaseReference {
  std::string path;
  double fps = 25;              // of the annotation
  std::vector<int64_t> frames;  // phase index per annotated frame
};

// Read before any decoding, so that a phase outside `names` fails first.
PhaseReference read_phase_reference(const std::string& path, double fps, const std::vector<std::string>& names);

// `labels` [S] of the embedded `seconds` of `input` against the annotation resampled to one label per
// second (majority of its frames); an unannotated ragged last second is left out.
train::VideoPhaseScores score_timeline(const PhaseReference& ref, const std::vector<int64_t>& seconds, const torch::Tensor& labels,
                                       int64_t num_classes, const std::string& input);

}  // namespace tessera::apps
