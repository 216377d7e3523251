#include "video_encoder.h"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <optional>

#include "tessera/models/config.h"
#include "tessera/models/linear.h"
#include "tessera/models/state_dict.h"
#include "tessera/models/videomae_hf.h"
#include "tessera/models/vit.h"

namespace tessera::apps {
namespace {

namespace fs = std::filesystem;

std::string model_name(const std::string& model) {
  fs::path p = fs::path(model).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "folder/"
  return fs::is_directory(p) ? p.filename().string() : p.stem().string();
}

VideoEncoderSpec clip_spec(const VideoEncoderArgs& a, models::VideoMAEConfig& cfg, std::optional<models::HfVideoMAEFolder>& folder) {
  VideoEncoderSpec s;
  s.name = model_name(a.model);
  if (fs::is_directory(a.model)) {
    folder = models::read_hf_videomae_folder(a.model);
    cfg = folder->config;
    if (folder->classification) s.class_names = folder->labels;
  } else {
    cfg = models::load_videomae_config(a.model);
  }
  s.frames_per_step = static_cast<int>(cfg.num_frames);
  s.image_size = static_cast<int>(cfg.image_size);
  return s;
}

VideoEncoderSpec frame_spec(const VideoEncoderArgs& a, const models::ViTConfig& cfg) {
  VideoEncoderSpec s;
  s.name = model_name(a.frame_model);
  s.frames_per_step = a.frame_batch;
  s.image_size = static_cast<int>(cfg.img_size);
  s.per_frame = true;
  for (int64_t i = 0; i < cfg.num_classes; ++i) s.class_names.push_back(std::to_string(i));
  return s;
}

class ClipEncoder : public VideoEncoder {
 public:
  ClipEncoder(const VideoEncoderArgs& a, const torch::Device& device, torch::ScalarType dtype) : device_(device), dtype_(dtype) {
    std::optional<models::HfVideoMAEFolder> folder;
    spec_ = clip_spec(a, cfg_, folder);
    if (folder) {
      enc_ = models::load_hf_videomae(*folder, device_, dtype_);
    } else {
      {
        // The checkpoint sets every parameter (a strict load): the linear layers wait for it on the device.
        const models::ParametersToBeLoaded loaded(dtype_, device_);
        enc_ = models::VideoMAEVideoEncoder(cfg_, -1);
      }
      enc_->to(device_, dtype_);
      models::KeyMapping km;
      km.prefix = a.weights_prefix;
      models::apply_weights(*enc_->videomae, models::read_weights(a.weights, km, device_), a.weights);
      enc_->eval();
    }
    if (device_.is_cuda()) {
      torch::NoGradGuard ng;
      const int64_t t = cfg_.num_frames, s = cfg_.image_size;
      enc_->forward(torch::zeros({1, t, cfg_.num_channels, s, s}, torch::TensorOptions().device(device_).dtype(dtype_)));
      torch::cuda::synchronize(device_.index());
    }
  }
  const VideoEncoderSpec& spec() const override { return spec_; }
  int64_t dim() const override { return cfg_.hidden_size; }

  std::vector<TimedEmbedding> encode(const patching::Clip& clip) override {
    torch::NoGradGuard ng;
    const auto out = enc_->forward(clip.frames.unsqueeze(0).to(device_, dtype_));
    TimedEmbedding e;
    e.first_s = clip.times.front();
    e.last_s = clip.times[clip.valid_frames - 1];
    e.embedding = out.pooled.squeeze(0).to(torch::kCPU).to(torch::kFloat);
    if (out.logits.defined()) e.probs = torch::softmax(out.logits.squeeze(0).to(torch::kCPU).to(torch::kFloat), 0);
    return {e};
  }

 private:
  torch::Device device_;
  torch::ScalarType dtype_;
  VideoEncoderSpec spec_;
  models::VideoMAEConfig cfg_;
  models::VideoMAEVideoEncoder enc_{nullptr};
};

class FrameEncoder : public VideoEncoder {
 public:
  FrameEncoder(const VideoEncoderArgs& a, const torch::Device& device, torch::ScalarType dtype) : device_(device), dtype_(dtype) {
    const models::ViTConfig cfg = models::load_vit_config(a.frame_model);
    spec_ = frame_spec(a, cfg);
    {
      // The checkpoint sets every parameter (a strict load): the linear layers wait for it on the device.
      const models::ParametersToBeLoaded loaded(dtype_, device_);
      vit_ = models::VisionTransformer(cfg);
    }
    vit_->eval();
    vit_->to(device_, dtype_);
    models::KeyMapping km;
    km.prefix = a.weights_prefix;
    models::apply_weights(*vit_, models::read_weights(a.weights, km, device_), a.weights);
    // The pooled width depends on the pooling options: measured on one blank frame.
    torch::NoGradGuard ng;
    const int64_t s = cfg.img_size;
    dim_ = vit_->forward_head(vit_->forward_features(torch::zeros({1, cfg.in_chans, s, s}, torch::TensorOptions().device(device_).dtype(dtype_))), true).size(1);
  }
  const VideoEncoderSpec& spec() const override { return spec_; }
  int64_t dim() const override { return dim_; }

  std::vector<TimedEmbedding> encode(const patching::Clip& clip) override {
    torch::NoGradGuard ng;
    const auto frames = clip.frames.narrow(0, 0, clip.valid_frames).to(device_, dtype_);
    const auto features = vit_->forward_features(frames);
    const auto emb = vit_->forward_head(features, /*pre_logits=*/true).to(torch::kCPU).to(torch::kFloat);
    torch::Tensor probs;
    if (!spec_.class_names.empty()) probs = torch::softmax(vit_->forward_head(features).to(torch::kCPU).to(torch::kFloat), 1);
    std::vector<TimedEmbedding> out(clip.valid_frames);
    for (int i = 0; i < clip.valid_frames; ++i) {
      out[i].first_s = out[i].last_s = clip.times[i];
      out[i].embedding = emb[i];
      if (probs.defined()) out[i].probs = probs[i];
    }
    return out;
  }

 private:
  torch::Device device_;
  torch::ScalarType dtype_;
  VideoEncoderSpec spec_;
  int64_t dim_ = 0;
  models::VisionTransformer vit_{nullptr};
};

}  // namespace

void validate_video_encoder_args(const VideoEncoderArgs& a) {
  if (a.model.empty() == a.frame_model.empty())
    throw CLI::ValidationError("--model", "give either --model (a clip encoder) or --frame-model (a per-frame encoder)");
  if (!a.model.empty() && fs::is_directory(a.model)) {
    if (!a.weights.empty()) throw CLI::ValidationError("--weights", "a model folder holds its own weights: give --model DIR alone");
    return;
  }
  if (a.weights.empty())
    throw CLI::ValidationError("--weights", "a config file (" + (a.model.empty() ? a.frame_model : a.model) + ") needs --weights");
  if (a.frame_batch <= 0) throw CLI::ValidationError("--frame-batch", "must be positive");
}

VideoEncoderSpec describe_video_encoder(const VideoEncoderArgs& a) {
  if (!a.frame_model.empty()) return frame_spec(a, models::load_vit_config(a.frame_model));
  models::VideoMAEConfig cfg;
  std::optional<models::HfVideoMAEFolder> folder;
  return clip_spec(a, cfg, folder);
}

std::unique_ptr<VideoEncoder> load_video_encoder(const VideoEncoderArgs& a, const torch::Device& device, torch::ScalarType dtype) {
  if (!a.frame_model.empty()) return std::make_unique<FrameEncoder>(a, device, dtype);
  return std::make_unique<ClipEncoder>(a, device, dtype);
}

}  // namespace tessera::apps
