#include "tessera/train/seg_trainer.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "tessera/io/atomic_file.h"
#include "tessera/models/config.h"
#include "tessera/models/safetensors.h"
#include "tessera/models/swin_unetr.h"
#include "tessera/patching/sliding_window.h"
#include "tessera/train/crop_sampler.h"
#include "tessera/train/losses.h"
#include "tessera/train/master_weights.h"
#include "tessera/train/pretrained.h"
#include "attention_scope.h"
#include "run_loop.h"
#include "tessera/train/seg_dataset.h"

namespace tessera::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

ValStats validate(models::SwinUNETRImpl& net, const std::vector<SegCase>& cases, const TrainConfig& c,
                  torch::Device dev, torch::ScalarType dtype, int64_t step,
                  const std::function<void(int64_t, int64_t)>& progress) {
  torch::NoGradGuard ng;
  const int64_t C = int64_t(c.labels.size());
  patching::SlidingWindowOptions so;
  so.roi_size = {c.crop.roi[0], c.crop.roi[1], c.crop.roi[2]};
  so.overlap = {c.validation.overlap};
  so.mode = patching::BlendMode::gaussian;
  so.sw_batch_size = c.validation.sw_batch;
  so.sw_device = dev;
  so.device = torch::kCPU;
  std::vector<double> sum(C - 1, 0.0);
  std::vector<int64_t> n(C - 1, 0);
  for (size_t i = 0; i < cases.size(); ++i) {
    const at::Tensor probs = patching::sliding_window_inference(
        cases[i].image.unsqueeze(0),
        [&](const at::Tensor& w) { return torch::softmax(net.forward(w.to(dev, dtype)).to(torch::kFloat), 1); }, so);
    const auto d = dice_per_label(probs.squeeze(0).argmax(0), cases[i].label, C);
    for (int64_t k = 0; k < C - 1; ++k)
      if (!std::isnan(d[k])) sum[k] += d[k], ++n[k];
    if (progress) progress(int64_t(i + 1), int64_t(cases.size()));
  }
  ValStats v;
  v.step = step;
  v.metric = "Dice";
  v.names.assign(c.labels.begin() + 1, c.labels.end());
  double total = 0;
  int64_t present = 0;
  for (int64_t k = 0; k < C - 1; ++k) {
    v.per_class.push_back(n[k] ? sum[k] / double(n[k]) : std::numeric_limits<double>::quiet_NaN());
    if (n[k]) total += v.per_class.back(), ++present;
  }
  v.mean = present ? total / double(present) : std::numeric_limits<double>::quiet_NaN();
  return v;
}

}  // namespace

TrainResult train_segmentation(const TrainConfig& cfg, const TrainOptions& opt, const TrainCallbacks& cb) {
  const auto t_start = Clock::now();
  const torch::Device dev(opt.device);
  if (dev.is_cuda() && !torch::cuda::is_available()) throw std::runtime_error("--device cuda: no CUDA device is available");
  const torch::ScalarType dtype = precision_dtype(opt.precision);
  const torch::ScalarType weights_dtype = precision_dtype(opt.weights_dtype);  // checked before hours of training
  if (dtype == torch::kHalf && !dev.is_cuda()) throw std::runtime_error("--precision fp16 needs --device cuda");
  AttentionScope attention(opt.attention);
  if (opt.out_dir.empty()) throw std::runtime_error("an output folder is required");
  fs::create_directories(opt.out_dir);

  // ---- model and its fp32 master weights ----
  const models::SwinUNETRConfig mc = models::load_swin_unetr_config(cfg.model);
  if (mc.out_channels != int64_t(cfg.labels.size()))
    throw std::runtime_error(cfg.path + ": " + std::to_string(cfg.labels.size()) + " labels but the model " + cfg.model +
                             " has out_channels " + std::to_string(mc.out_channels));
  torch::manual_seed(cfg.seed);  // weight initialisation
  models::SwinUNETR net(mc);
  if (!cfg.pretrained.empty()) load_pretrained_encoder(*net, cfg.pretrained, cfg.pretrained_keys);
  net->to(dev);
  MasterWeights state(*net, dtype, cfg.optim);
  const int64_t start = resume_from(opt.resume, state, cfg.seed, cfg.optim.steps);

  // ---- data ----
  auto data_progress = [&](const char* what) {
    return [&cb, what](int64_t d, int64_t t) {
      if (cb.progress) cb.progress(what, d, t);
    };
  };
  const int64_t C = int64_t(cfg.labels.size());
  const std::vector<SegCase> train_cases = load_split(cfg.train, cfg.preprocess, C, data_progress("train data"));
  std::vector<SegCase> val_cases;
  if (opt.validate) val_cases = load_split(cfg.val, cfg.preprocess, C, data_progress("val data"));

  std::vector<std::string> val_columns = {"val_mean_dice"};
  for (size_t k = 1; k < cfg.labels.size(); ++k) val_columns.push_back("val_dice_" + cfg.labels[k]);
  const Loop loop{cfg, opt, cb, state, *net, "dice_loss", "ce_loss", val_columns, {{"model_config", cfg.model}},
                  [&](int64_t step) {
                    const SegBatch batch = sample_batch(train_cases, cfg.crop, cfg.augment, cfg.optim.batch_size, cfg.seed, step);
                    const DiceCE l = dice_ce_loss(net->forward(batch.image.to(dev, dtype)), batch.label.to(dev),
                                                  cfg.optim.dice_weight, cfg.optim.ce_weight);
                    return StepLoss{l.total, l.dice.item<double>(), l.ce.item<double>()};
                  },
                  [&](int64_t steps_done) { return validate(*net, val_cases, cfg, dev, dtype, steps_done, data_progress("val")); },
                  [](const ValStats& v) {
                    std::vector<double> cells = {v.mean};
                    cells.insert(cells.end(), v.per_class.begin(), v.per_class.end());
                    return cells;
                  }};
  TrainResult result = run_loop(loop, start);

  // The trained weights alone, with MONAI's key names: what `tessera segment --weights` loads.
  if (result.steps_done == cfg.optim.steps) {
    const models::StateDict weights = state.weights(weights_dtype);
    result.weights = (fs::path(opt.out_dir) / "model.safetensors").string();
    models::safetensors::save(result.weights, weights, {{"model_config", cfg.model}, {"train_config", cfg.path}});
    nlohmann::json s = {{"steps", result.steps_done}, {"final_loss", result.last_step.loss}, {"labels", cfg.labels},
                        {"device", opt.device}, {"precision", opt.precision}, {"attention", opt.attention}};
    if (result.validated) {
      nlohmann::json per = nlohmann::json::object();
      for (size_t k = 0; k < result.last_val.per_class.size(); ++k)
        per[cfg.labels[k + 1]] = std::isnan(result.last_val.per_class[k]) ? nlohmann::json(nullptr) : nlohmann::json(result.last_val.per_class[k]);
      s["val_dice"] = per;
      s["val_mean_dice"] = result.last_val.mean;
      s["val_cases"] = val_cases.size();
    }
    result.summary = (fs::path(opt.out_dir) / "summary.json").string();
    io::write_file_atomically(result.summary, s.dump(2) + "\n");
  }
  result.seconds = seconds_since(t_start);
  return result;
}

}  // namespace tessera::train
