// The encoders `tessera video` runs over sampled frames, behind one interface:
// a VideoMAE clip encoder (a configs/videomae_*.yaml with --weights, or a
// Hugging Face folder as downloaded) embeds each clip as a whole; a per-frame
// image encoder (a timm-layout ViT, configs/vit_*.yaml with --weights, e.g. an
// endoscopy ViT-B/16) embeds every sampled frame. Either way the caller gets
// embeddings tagged with the times they cover, to pool per second.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "tessera/patching/video_clips.h"

namespace tessera::apps {

struct VideoEncoderArgs {
  std::string model;                 // VideoMAE config or Hugging Face folder (clip path)
  std::string frame_model;           // ViT config (per-frame path); exclusive with model
  std::vector<std::string> weights;  // for a config file
  std::string weights_prefix = "weights.";  // the CLI's default, as embed-wsi's
  int frame_batch = 32;              // frames per forward on the per-frame path
};

// What the sampler and the outputs need of an encoder, read from its config
// alone: known before the weights are, so that decoding can start at once.
struct VideoEncoderSpec {
  std::string name;                      // the config's stem or the folder's name
  int frames_per_step = 0;               // frames handed to encode() at a time
  int image_size = 0;                    // their side in pixels
  bool per_frame = false;                // the per-frame path: consecutive groups must not overlap
  std::vector<std::string> class_names;  // the classifier's outputs (empty without one)
};

// One embedding and the sample times it covers (first and last), with class
// probabilities when the encoder has a classifier.
struct TimedEmbedding {
  double first_s = 0, last_s = 0;
  torch::Tensor embedding;  // [D] float32 on the CPU
  torch::Tensor probs;      // [L] float32 on the CPU, or undefined
};

class VideoEncoder {
 public:
  virtual ~VideoEncoder() = default;
  virtual const VideoEncoderSpec& spec() const = 0;
  virtual int64_t dim() const = 0;  // width of an embedding
  // The embeddings of one group of sampled frames (only its valid frames count).
  virtual std::vector<TimedEmbedding> encode(const patching::Clip& clip) = 0;
};

// Checks the combination of options (one of --model / --frame-model; --weights
// with a config file, none with a folder); throws CLI::ValidationError.
void validate_video_encoder_args(const VideoEncoderArgs& a);
// The encoder's spec from its config (or config.json) alone; throws as loading would for a bad config.
VideoEncoderSpec describe_video_encoder(const VideoEncoderArgs& a);
// The encoder on `device` in `dtype` (its outputs are float32 on the CPU whatever the dtype): built there, the
// weights read straight onto it, and on a GPU one group of blank frames run, so that the first group's one-time
// costs (kernels loaded, cuBLAS's handle, the allocator's pool) are paid here.
std::unique_ptr<VideoEncoder> load_video_encoder(const VideoEncoderArgs& a, const torch::Device& device,
                                                 torch::ScalarType dtype = torch::kFloat);

}  // namespace tessera::apps
