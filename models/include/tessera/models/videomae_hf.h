// A Hugging Face VideoMAE model folder as downloaded from the Hub: config.json
// beside model.safetensors, its shards (model.safetensors.index.json) or
// pytorch_model.bin (or its index). The architecture and every size come from
// config.json (transformers' VideoMAEConfig defaults for keys it leaves out);
// the weights load strictly by their original names:
//   VideoMAEModel                   embeddings.*, encoder.layer.*, layernorm.*
//   VideoMAEForPreTraining          videomae.* (the decoder and mask token are not loaded)
//   VideoMAEForVideoClassification  videomae.*, fc_norm.* (with use_mean_pooling), classifier.*
// Checkpoints with the separate q_bias / v_bias parameters load as well.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/normalization.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/models/config.h"
#include "tessera/models/linear.h"
#include "tessera/models/videomae.h"

namespace tessera::models {

struct HfVideoMAEFolder {
  std::string dir, config_path;
  VideoMAEConfig config;
  std::string architecture;          // architectures[0] of config.json, "VideoMAEModel" when absent
  bool classification = false;       // VideoMAEForVideoClassification
  int64_t num_labels = 0;            // classifier outputs (classification only)
  std::vector<std::string> labels;   // id2label by index; the index as text where config.json names none
  std::vector<std::string> weights;  // the weights file (a shard index is passed as is)
};

// Reads config.json and finds the weights file. Throws std::runtime_error
// naming the file for a missing or malformed config.json, a model_type other
// than videomae, an unsupported architecture or setting, or no weights file.
HfVideoMAEFolder read_hf_videomae_folder(const std::string& dir);

// VideoMAEForVideoClassification's module tree (videomae, fc_norm, classifier);
// without a head it holds the bare encoder under `videomae`.
class VideoMAEVideoEncoderImpl : public torch::nn::Module {
 public:
  // num_labels < 0: no head (VideoMAEModel); 0: a head without classifier (HF's Identity).
  VideoMAEVideoEncoderImpl(const VideoMAEConfig& config, int64_t num_labels);
  struct Output {
    torch::Tensor last_hidden_state;  // [B, N, D]
    torch::Tensor pooled;             // [B, D]: the classifier's input, or the mean of the tokens without a head
    torch::Tensor logits;             // [B, num_labels]; undefined without a classifier
  };
  Output forward(const torch::Tensor& pixel_values);
  bool has_head() const { return head_; }

  VideoMAEModel videomae{nullptr};
  torch::nn::LayerNorm fc_norm{nullptr};
  Linear classifier{nullptr};

 private:
  bool head_;
};
TORCH_MODULE(VideoMAEVideoEncoder);

// The folder's model with its weights, strictly loaded, in eval mode, on
// `device` in `dtype`: built there, the file read straight onto it. A
// checkpoint that does not fit config.json throws naming the weights file.
VideoMAEVideoEncoder load_hf_videomae(const HfVideoMAEFolder& folder, const torch::Device& device = torch::kCPU,
                                      torch::ScalarType dtype = torch::kFloat);

}  // namespace tessera::models
