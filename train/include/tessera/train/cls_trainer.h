// Classification training of the long-sequence aggregator over feature files
// (train_config.h, task: classification): bag level (a slide's label from its
// pooled embedding) or token level (a label per second of video). Shares the
// options, results, checkpoints, mixed precision and exact resume of
// segmentation training; validation reports per-class recall, balanced
// accuracy and accuracy. model.safetensors is an aggregator file that
// `tessera embed-wsi --aggregator-weights` / `tessera video --temporal-weights` load.
#pragma once

#include "tessera/train/seg_trainer.h"

namespace tessera::train {

TrainResult train_classification(const TrainConfig& config, const TrainOptions& options, const TrainCallbacks& callbacks = {});

}  // namespace tessera::train
