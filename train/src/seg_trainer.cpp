#include "tessera/train/seg_trainer.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "tessera/io/atomic_file.h"
#include "tessera/models/config.h"
#include "tessera/models/safetensors.h"
#include "tessera/models/state_dict.h"
#include "tessera/models/swin_unetr.h"
#include "tessera/models/transformer_layers.h"
#include "tessera/patching/sliding_window.h"
#include "tessera/train/adamw.h"
#include "tessera/train/checkpoint.h"
#include "tessera/train/crop_sampler.h"
#include "tessera/train/losses.h"
#include "tessera/train/seg_dataset.h"

namespace tessera::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

torch::ScalarType dtype_of(const std::string& precision) {
  if (precision == "fp32") return torch::kFloat;
  if (precision == "bf16") return torch::kBFloat16;
  if (precision == "fp16") return torch::kHalf;
  throw std::invalid_argument("precision must be fp32, bf16 or fp16, got " + precision);
}

models::AttentionBackend backend_of(const std::string& name) {
  if (name == "tessera") return models::AttentionBackend::tessera;
  if (name == "torch_sdpa") return models::AttentionBackend::torch_sdpa;
  if (name == "reference") return models::AttentionBackend::reference_f64;
  throw std::invalid_argument("attention must be tessera, torch_sdpa or reference, got " + name);
}

// Restores the process-wide attention backend when training ends or throws.
struct BackendScope {
  models::AttentionBackend saved = models::attention_backend();
  explicit BackendScope(models::AttentionBackend b) { models::set_attention_backend(b); }
  ~BackendScope() { models::set_attention_backend(saved); }
};

// Loads encoder weights (swinViT.*) from a MONAI SwinUNETR checkpoint or the published SSL files.
void load_pretrained_encoder(models::SwinUNETRImpl& net, const TrainConfig& c) {
  models::KeyMapping km;
  if (c.pretrained_keys == "ssl") km = models::swin_unetr_ssl_key_mapping();
  if (c.pretrained_keys == "research") km = models::swin_unetr_research_key_mapping();
  models::StateDict sd = models::remap_keys(models::safetensors::load(c.pretrained), km);
  for (auto it = sd.begin(); it != sd.end();)
    it = it->first.rfind("swinViT.", 0) == 0 ? std::next(it) : sd.erase(it);
  if (sd.empty())
    throw std::runtime_error(c.pretrained + ": no swinViT.* encoder weights after the `" + c.pretrained_keys + "` key mapping");
  const auto report = models::load_state_dict(net, sd, /*strict=*/false);
  if (!report.unexpected.empty())
    throw std::runtime_error(c.pretrained + ": encoder keys the model lacks: " + report.summary());
}

// metrics.csv: one row per step, validation columns filled on validation steps.
class MetricsLog {
 public:
  MetricsLog(std::string path, const std::vector<std::string>& labels) : path_(std::move(path)) {
    header_ = "step,lr,loss,dice_loss,ce_loss,grad_norm,loss_scale,skipped,seconds,val_mean_dice";
    for (size_t k = 1; k < labels.size(); ++k) header_ += ",val_dice_" + labels[k];
    columns_ = 10 + labels.size() - 1;
  }
  // Keeps the rows of an earlier run before `step` (resume).
  void keep_earlier(int64_t step) {
    std::ifstream in(path_);
    std::string line;
    if (!std::getline(in, line) || line != header_) return;
    while (std::getline(in, line))
      if (!line.empty() && std::stoll(line.substr(0, line.find(','))) <= step) rows_.push_back(line);
  }
  void add(const StepStats& s) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%lld,%.6g,%.6f,%.6f,%.6f,%.6g,%.6g,%d,%.3f", (long long)s.step, s.lr, s.loss,
                  s.dice_loss, s.ce_loss, s.grad_norm, s.loss_scale, s.skipped ? 1 : 0, s.seconds);
    rows_.push_back(std::string(buf) + std::string(columns_ - 9, ','));
  }
  void add_validation(const ValStats& v) {
    std::string cells = "," + fmt(v.mean_dice);
    for (double d : v.dice) cells += "," + (std::isnan(d) ? std::string() : fmt(d));
    // Replace the empty validation cells of this step's row (added just before).
    std::string& row = rows_.back();
    row.resize(row.size() - (columns_ - 9));
    row += cells;
  }
  void flush() const {
    std::string text = header_ + "\n";
    for (const auto& r : rows_) text += r + "\n";
    io::write_file_atomically(path_, text);
  }

 private:
  static std::string fmt(double d) {
    char b[32];
    std::snprintf(b, sizeof b, "%.5f", d);
    return b;
  }
  std::string path_, header_;
  size_t columns_;
  std::vector<std::string> rows_;
};

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
  double total = 0;
  int64_t present = 0;
  for (int64_t k = 0; k < C - 1; ++k) {
    v.dice.push_back(n[k] ? sum[k] / double(n[k]) : std::numeric_limits<double>::quiet_NaN());
    if (n[k]) total += v.dice.back(), ++present;
  }
  v.mean_dice = present ? total / double(present) : std::numeric_limits<double>::quiet_NaN();
  return v;
}

}  // namespace

TrainResult train_segmentation(const TrainConfig& cfg, const TrainOptions& opt, const TrainCallbacks& cb) {
  const auto t_start = Clock::now();
  const torch::Device dev(opt.device);
  if (dev.is_cuda() && !torch::cuda::is_available()) throw std::runtime_error("--device cuda: no CUDA device is available");
  const torch::ScalarType dtype = dtype_of(opt.precision);
  dtype_of(opt.weights_dtype);  // validate before hours of training, not after
  if (dtype == torch::kHalf && !dev.is_cuda()) throw std::runtime_error("--precision fp16 needs --device cuda");
  BackendScope backend(backend_of(opt.attention));
  if (opt.out_dir.empty()) throw std::runtime_error("an output folder is required");
  fs::create_directories(opt.out_dir);

  // ---- model and its fp32 master weights ----
  const models::SwinUNETRConfig mc = models::load_swin_unetr_config(cfg.model);
  if (mc.out_channels != int64_t(cfg.labels.size()))
    throw std::runtime_error(cfg.path + ": " + std::to_string(cfg.labels.size()) + " labels but the model " + cfg.model +
                             " has out_channels " + std::to_string(mc.out_channels));
  torch::manual_seed(cfg.seed);  // weight initialisation
  models::SwinUNETR net(mc);
  if (!cfg.pretrained.empty()) load_pretrained_encoder(*net, cfg);
  net->to(dev);
  std::vector<std::string> names;
  std::vector<at::Tensor> params, masters;
  for (const auto& kv : net->named_parameters()) {
    names.push_back(kv.key());
    params.push_back(kv.value());
  }
  for (const auto& p : params) masters.push_back(dtype == torch::kFloat ? p.detach() : p.detach().clone());
  if (dtype != torch::kFloat) {
    torch::NoGradGuard ng;
    for (auto& p : params) p.set_data(p.to(dtype));
    for (auto& b : net->buffers())
      if (b.is_floating_point()) b.set_data(b.to(dtype));
  }
  AdamW adamw(masters, cfg.optim);
  double loss_scale = dtype == torch::kHalf ? 65536.0 : 1.0;
  int64_t good_steps = 0;
  int64_t start = 0;

  const std::string ckpt_path = (fs::path(opt.out_dir) / "checkpoint.safetensors").string();
  if (!opt.resume.empty()) {
    Checkpoint ck = load_checkpoint(opt.resume);
    if (ck.seed != cfg.seed)
      throw std::runtime_error(opt.resume + ": checkpoint was trained with seed " + std::to_string(ck.seed) + ", the config says " +
                               std::to_string(cfg.seed));
    torch::NoGradGuard ng;
    for (size_t i = 0; i < names.size(); ++i) {
      auto find = [&](std::map<std::string, at::Tensor>& m, const std::string& what) -> at::Tensor& {
        auto it = m.find(names[i]);
        if (it == m.end()) throw std::runtime_error(opt.resume + ": no " + what + " for parameter " + names[i]);
        if (it->second.sizes() != masters[i].sizes())
          throw std::runtime_error(opt.resume + ": " + what + " of " + names[i] + " has another shape than the model's");
        return it->second;
      };
      masters[i].copy_(find(ck.model, "weights"));
      adamw.exp_avg()[i].copy_(find(ck.exp_avg, "exp_avg"));
      adamw.exp_avg_sq()[i].copy_(find(ck.exp_avg_sq, "exp_avg_sq"));
      if (dtype != torch::kFloat) params[i].copy_(masters[i]);
    }
    for (const auto& kv : net->named_buffers()) {
      auto it = ck.model.find(kv.key());
      if (it != ck.model.end()) kv.value().copy_(it->second);
    }
    adamw.set_steps_taken(ck.step);
    loss_scale = ck.loss_scale;
    start = ck.step;
    if (start > cfg.optim.steps) throw std::runtime_error(opt.resume + ": checkpoint is past optim.steps");
  }

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

  MetricsLog log((fs::path(opt.out_dir) / "metrics.csv").string(), cfg.labels);
  if (start > 0) log.keep_earlier(start);

  TrainResult result;
  result.checkpoint = ckpt_path;
  result.metrics = (fs::path(opt.out_dir) / "metrics.csv").string();
  auto save = [&](int64_t steps_done) {
    Checkpoint ck;
    ck.step = steps_done;
    ck.seed = cfg.seed;
    ck.loss_scale = loss_scale;
    for (size_t i = 0; i < names.size(); ++i) {
      ck.model[names[i]] = masters[i];
      ck.exp_avg[names[i]] = adamw.exp_avg()[i];
      ck.exp_avg_sq[names[i]] = adamw.exp_avg_sq()[i];
    }
    for (const auto& kv : net->named_buffers()) ck.model[kv.key()] = kv.value().is_floating_point() ? kv.value().to(torch::kFloat) : kv.value();
    ck.info["config"] = cfg.path;
    ck.info["model_config"] = cfg.model;
    ck.info["precision"] = opt.precision;
    save_checkpoint(ckpt_path, ck);
    log.flush();
  };

  const int64_t end = opt.stop_after >= 0 ? std::min(cfg.optim.steps, opt.stop_after) : cfg.optim.steps;
  const int64_t val_every = cfg.validation.every;
  const int64_t ck_every = opt.checkpoint_every > 0 ? opt.checkpoint_every : val_every;
  net->train();
  for (int64_t step = start; step < end; ++step) {
    const auto t0 = Clock::now();
    StepStats st;
    st.step = step + 1;
    st.steps = cfg.optim.steps;
    st.lr = lr_at(cfg.optim, step);
    const SegBatch batch = sample_batch(train_cases, cfg.crop, cfg.augment, cfg.optim.batch_size, cfg.seed, step);
    const at::Tensor logits = net->forward(batch.image.to(dev, dtype));
    const DiceCE loss = dice_ce_loss(logits, batch.label.to(dev), cfg.optim.dice_weight, cfg.optim.ce_weight);
    (loss_scale != 1.0 ? loss.total * loss_scale : loss.total).backward();
    std::vector<at::Tensor> grads;
    for (auto& p : params) {
      at::Tensor g = p.grad();
      grads.push_back(g.defined() ? g.to(torch::kFloat) : g);
      if (g.defined()) p.mutable_grad() = at::Tensor();
    }
    if (loss_scale != 1.0)
      for (auto& g : grads)
        if (g.defined()) g.div_(loss_scale);
    st.grad_norm = clip_grad_norm(grads, cfg.optim.grad_clip);
    st.loss = loss.total.item<double>();
    st.dice_loss = loss.dice.item<double>();
    st.ce_loss = loss.ce.item<double>();
    if (!std::isfinite(st.grad_norm) || !std::isfinite(st.loss)) {
      if (dtype != torch::kHalf)
        throw std::runtime_error("step " + std::to_string(step + 1) + ": loss or gradients are not finite (lower optim.lr?)");
      loss_scale /= 2;  // fp16 overflow: skip the update
      good_steps = 0;
      st.skipped = true;
      if (loss_scale < 1) throw std::runtime_error("fp16 loss scale underflowed: gradients are not finite");
    } else {
      torch::NoGradGuard ng;
      adamw.step(grads, st.lr);
      if (dtype != torch::kFloat)
        for (size_t i = 0; i < params.size(); ++i) params[i].copy_(masters[i]);
      if (dtype == torch::kHalf && ++good_steps % 1000 == 0) loss_scale *= 2;
    }
    st.loss_scale = loss_scale;
    st.seconds = seconds_since(t0);
    log.add(st);
    result.last_step = st;
    if (cb.on_step) cb.on_step(st);
    if (cb.progress) cb.progress("train", step + 1, cfg.optim.steps);
    const bool last = step + 1 == end;
    if (opt.validate && ((val_every > 0 && (step + 1) % val_every == 0) || step + 1 == cfg.optim.steps)) {
      net->eval();
      result.last_val = validate(*net, val_cases, cfg, dev, dtype, step + 1, data_progress("val"));
      result.validated = true;
      net->train();
      log.add_validation(result.last_val);
      if (cb.on_validation) cb.on_validation(result.last_val);
    }
    if (last || (ck_every > 0 && (step + 1) % ck_every == 0)) save(step + 1);
  }
  if (start >= end) save(start);
  result.steps_done = std::max(start, end);

  // The trained weights alone, with MONAI's key names: what `tessera segment --weights` loads.
  if (result.steps_done == cfg.optim.steps) {
    const torch::ScalarType wt = dtype_of(opt.weights_dtype);
    models::StateDict weights;
    for (size_t i = 0; i < names.size(); ++i) weights[names[i]] = masters[i].to(wt);
    for (const auto& kv : net->named_buffers()) weights[kv.key()] = kv.value().is_floating_point() ? kv.value().to(wt) : kv.value();
    result.weights = (fs::path(opt.out_dir) / "model.safetensors").string();
    models::safetensors::save(result.weights, weights, {{"model_config", cfg.model}, {"train_config", cfg.path}});
    nlohmann::json s = {{"steps", result.steps_done}, {"final_loss", result.last_step.loss}, {"labels", cfg.labels},
                        {"device", opt.device}, {"precision", opt.precision}, {"attention", opt.attention}};
    if (result.validated) {
      nlohmann::json per = nlohmann::json::object();
      for (size_t k = 0; k < result.last_val.dice.size(); ++k)
        per[cfg.labels[k + 1]] = std::isnan(result.last_val.dice[k]) ? nlohmann::json(nullptr) : nlohmann::json(result.last_val.dice[k]);
      s["val_dice"] = per;
      s["val_mean_dice"] = result.last_val.mean_dice;
      s["val_cases"] = val_cases.size();
    }
    result.summary = (fs::path(opt.out_dir) / "summary.json").string();
    io::write_file_atomically(result.summary, s.dump(2) + "\n");
  }
  result.seconds = seconds_since(t_start);
  return result;
}

}  // namespace tessera::train
