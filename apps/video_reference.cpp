#include "video_reference.h"

#include <stdexcept>

#include "tessera/train/phase_labels.h"

namespace tessera::apps {

PhaseReference read_phase_reference(const std::string& path, double fps, const std::vector<std::string>& names) {
  if (names.empty())
    throw std::runtime_error(path + ": --reference needs the phase names in the model's class order (--labels)");
  return {path, fps, train::read_frame_phases(path, names)};
}

train::VideoPhaseScores score_timeline(const PhaseReference& ref, const std::vector<int64_t>& seconds, const torch::Tensor& labels,
                                       int64_t num_classes, const std::string& input) {
  const std::vector<int64_t> truth =
      train::labels_at_seconds(train::majority_per_second(ref.frames, ref.fps), seconds, ref.path, input);
  const torch::Tensor l = labels.to(torch::kLong).contiguous();
  const std::vector<int64_t> pred(l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + truth.size());
  return train::score_video(pred, truth, num_classes);
}

}  // namespace tessera::apps
