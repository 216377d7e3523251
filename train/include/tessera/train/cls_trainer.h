// Classification training of the long-sequence aggregator over feature files
// (train_config.h, task: classification): bag level (a slide's label from its
// pooled embedding) or token level (a label per second of video). Shares the
// options, results, checkpoints, mixed precision and exact resume of
// segmentation training; validation reports per-class recall, balanced
// accuracy and accuracy, and at token level (one video per validation item)
// surgical-phase precision, recall and Jaccard (phase_metrics.h). model.safetensors is an aggregator file that
// `tessera embed-wsi --aggregator-weights` / `tessera video --temporal-weights` load.
#pragma once

#include "tessera/train/seg_trainer.h"

namespace tessera::train {

TrainResult train_classification(const TrainConfig& config, const TrainOptions& options, const TrainCallbacks& callbacks = {});

}  // namespace tessera::train
