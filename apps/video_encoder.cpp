#include "video_encoder.h"

#include <CLI/CLI.hpp>

#include <filesystem>

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

class ClipEncoder : public VideoEncoder {
 public:
  ClipEncoder(const VideoEncoderArgs& a, const torch::Device& device, torch::ScalarType dtype)
      : device_(device), dtype_(dtype), name_(model_name(a.model)) {
    if (fs::is_directory(a.model)) {
      const auto folder = models::read_hf_videomae_folder(a.model);
      cfg_ = folder.config;
      enc_ = models::load_hf_videomae(folder);
      if (folder.classification) names_ = folder.labels;
    } else {
      cfg_ = models::load_videomae_config(a.model);
      enc_ = models::VideoMAEVideoEncoder(cfg_, -1);
      models::KeyMapping km;
      km.prefix = a.weights_prefix;
      models::load_weights(*enc_->videomae, a.weights, km);
      enc_->eval();
    }
    enc_->to(device_, dtype_);
  }
  int frames_per_step() const override { return static_cast<int>(cfg_.num_frames); }
  int image_size() const override { return static_cast<int>(cfg_.image_size); }
  int64_t dim() const override { return cfg_.hidden_size; }
  const std::vector<std::string>& class_names() const override { return names_; }
  std::string name() const override { return name_; }
  bool per_frame() const override { return false; }

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
  std::string name_;
  models::VideoMAEConfig cfg_;
  models::VideoMAEVideoEncoder enc_{nullptr};
  std::vector<std::string> names_;
};

class FrameEncoder : public VideoEncoder {
 public:
  FrameEncoder(const VideoEncoderArgs& a, const torch::Device& device, torch::ScalarType dtype)
      : device_(device), dtype_(dtype), name_(model_name(a.frame_model)), batch_(a.frame_batch) {
    {
      // The checkpoint sets every parameter (a strict load): the linear layers wait for it on the device.
      const models::ParametersToBeLoaded loaded(dtype_, device_);
      vit_ = models::VisionTransformer(models::load_vit_config(a.frame_model));
    }
    models::KeyMapping km;
    km.prefix = a.weights_prefix;
    models::load_weights(*vit_, a.weights, km);
    vit_->eval();
    vit_->to(device_, dtype_);
    for (int64_t i = 0; i < vit_->config().num_classes; ++i) names_.push_back(std::to_string(i));
    // The pooled width depends on the pooling options: measured on one blank frame.
    torch::NoGradGuard ng;
    const int64_t s = vit_->config().img_size;
    dim_ = vit_->forward_head(vit_->forward_features(torch::zeros({1, vit_->config().in_chans, s, s}, torch::TensorOptions().device(device_).dtype(dtype_))), true).size(1);
  }
  int frames_per_step() const override { return batch_; }
  int image_size() const override { return static_cast<int>(vit_->config().img_size); }
  int64_t dim() const override { return dim_; }
  const std::vector<std::string>& class_names() const override { return names_; }
  std::string name() const override { return name_; }
  bool per_frame() const override { return true; }

  std::vector<TimedEmbedding> encode(const patching::Clip& clip) override {
    torch::NoGradGuard ng;
    const auto frames = clip.frames.narrow(0, 0, clip.valid_frames).to(device_, dtype_);
    const auto features = vit_->forward_features(frames);
    const auto emb = vit_->forward_head(features, /*pre_logits=*/true).to(torch::kCPU).to(torch::kFloat);
    torch::Tensor probs;
    if (!names_.empty()) probs = torch::softmax(vit_->forward_head(features).to(torch::kCPU).to(torch::kFloat), 1);
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
  std::string name_;
  int batch_;
  int64_t dim_ = 0;
  models::VisionTransformer vit_{nullptr};
  std::vector<std::string> names_;
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

std::unique_ptr<VideoEncoder> load_video_encoder(const VideoEncoderArgs& a, const torch::Device& device, torch::ScalarType dtype) {
  if (!a.frame_model.empty()) return std::make_unique<FrameEncoder>(a, device, dtype);
  return std::make_unique<ClipEncoder>(a, device, dtype);
}

}  // namespace tessera::apps
