// Fine-tuning from pretrained Swin UNETR encoders: only the swinViT.* weights
// of a checkpoint are loaded (the decoder and head stay freshly initialised),
// from a MONAI SwinUNETR state dict ("monai"), the published self-supervised
// model_swinvit.pt ("ssl": module.* with fc1/fc2) or the research-contributions
// BTCV layout ("research": module.swin_vit.*), each converted to safetensors.
#pragma once

#include <string>

#include "tessera/models/state_dict.h"
#include "tessera/models/swin_unetr.h"

namespace tessera::train {

// Throws naming `path` when no encoder weight is found or a key/shape does
// not fit the model; returns what was loaded (missing = the non-encoder parts).
models::LoadReport load_pretrained_encoder(models::SwinUNETRImpl& net, const std::string& path, const std::string& keys);

}  // namespace tessera::train
