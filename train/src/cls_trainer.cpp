#include "tessera/train/cls_trainer.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

#include "attention_scope.h"
#include "classifier.h"
#include "run_loop.h"
#include "tessera/io/atomic_file.h"
#include "tessera/models/aggregator.h"
#include "tessera/models/state_dict.h"
#include "tessera/train/cls_dataset.h"
#include "tessera/train/master_weights.h"
#include "tessera/train/tile_dataset.h"
#include "tessera/models/config.h"
#include "tessera/models/safetensors.h"
#include "tessera/models/vit.h"
#include "tessera/models/vit_weights.h"

namespace tessera::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Several bags packed as one varlen batch.
struct Packed {
  at::Tensor tokens, positions, cu_seqlens, labels;
};

Packed pack(const std::vector<const FeatureBag*>& bags, bool with_positions) {
  std::vector<at::Tensor> t, p, l;
  std::vector<int32_t> cu = {0};
  for (const auto* b : bags) {
    t.push_back(b->tokens);
    p.push_back(b->positions);
    l.push_back(b->labels);
    cu.push_back(cu.back() + int32_t(b->tokens.size(0)));
  }
  Packed out{at::cat(t), with_positions ? at::cat(p) : at::Tensor(), torch::tensor(cu, torch::kInt), at::cat(l)};
  return out;
}

models::AggregatorConfig model_config(const TrainConfig& c, int64_t in_dim) {
  models::AggregatorConfig m;
  m.in_dim = in_dim;
  m.dim = c.aggregator.dim;
  m.depth = c.aggregator.depth;
  m.num_heads = c.aggregator.num_heads;
  m.mlp_ratio = c.aggregator.mlp_ratio;
  m.position = models::parse_position_encoding(c.aggregator.position);
  m.rope_base = c.aggregator.rope_base;
  m.causal = c.aggregator.causal;
  m.num_classes = int64_t(c.labels.size());
  m.pooled_head = c.level == "bag";
  return m;
}

void check_bags(const std::vector<FeatureBag>& bags, const std::string& manifest, int64_t dim, int64_t pos_dims) {
  if (bags.empty()) throw std::runtime_error(manifest + ": no feature files");
  for (const auto& b : bags) {
    if (b.tokens.size(1) != dim)
      throw std::runtime_error(manifest + ": " + b.name + " has " + std::to_string(b.tokens.size(1)) + "-wide features, the first file " +
                               std::to_string(dim));
    if (pos_dims > 0 && b.positions.size(1) != pos_dims)
      throw std::runtime_error(manifest + ": " + b.name + " has " + std::to_string(b.positions.size(1)) +
                               "-D positions; aggregator.position needs " + std::to_string(pos_dims));
  }
}

// Per-class recall, balanced accuracy and accuracy from (prediction, truth) counts.
ValStats score(const std::vector<double>& hit, const std::vector<double>& count, const TrainConfig& c, int64_t step) {
  ValStats v;
  v.step = step;
  v.metric = "recall";
  v.names = c.labels;
  double sum = 0, present = 0, hits = 0, total = 0;
  for (size_t k = 0; k < hit.size(); ++k) {
    v.per_class.push_back(count[k] > 0 ? hit[k] / count[k] : std::numeric_limits<double>::quiet_NaN());
    if (count[k] > 0) sum += v.per_class.back(), present += 1;
    hits += hit[k];
    total += count[k];
  }
  v.mean = present > 0 ? sum / present : std::numeric_limits<double>::quiet_NaN();
  v.accuracy = total > 0 ? hits / total : 0;
  return v;
}

Classifier aggregator_classifier(const TrainConfig& cfg, const TrainOptions& opt, torch::Device dev, torch::ScalarType dtype) {
  auto train_bags = std::make_shared<std::vector<FeatureBag>>(load_bags(cfg.train, cfg.labels, cfg.level, cfg.label_fps));
  auto val_bags = std::make_shared<std::vector<FeatureBag>>();
  if (opt.validate) *val_bags = load_bags(cfg.val, cfg.labels, cfg.level, cfg.label_fps);
  const models::AggregatorConfig mc = model_config(cfg, train_bags->front().tokens.size(1));
  const int64_t pos_dims = mc.position == models::PositionEncoding::rope2d ? 2 : (mc.position == models::PositionEncoding::rope1d ? 1 : 0);
  check_bags(*train_bags, cfg.train.path, mc.in_dim, pos_dims);
  if (opt.validate) check_bags(*val_bags, cfg.val.path, mc.in_dim, pos_dims);
  const bool with_positions = pos_dims > 0;
  torch::manual_seed(cfg.seed);
  auto net = std::make_shared<models::LongSequenceAggregatorImpl>(mc);
  net->to(dev);
  Classifier c;
  c.module = net;
  c.val_items = val_bags->size();
  auto run = [net, dev, dtype, with_positions](const Packed& p) {
    return net->forward(p.tokens.to(dev, dtype), with_positions ? p.positions.to(dev) : at::Tensor(), p.cu_seqlens).logits;
  };
  c.train_batch = [=, &cfg](std::mt19937_64& gen) {
    std::vector<const FeatureBag*> batch;
    for (int64_t b = 0; b < cfg.optim.batch_size; ++b) batch.push_back(&(*train_bags)[gen() % train_bags->size()]);
    const Packed p = pack(batch, with_positions);
    return std::make_pair(run(p), p.labels.to(dev));
  };
  c.for_each_val = [=](const std::function<void(const at::Tensor&, const at::Tensor&)>& f) {
    for (const auto& b : *val_bags) {
      const Packed p = pack({&b}, with_positions);
      f(run(p), p.labels);
    }
  };
  c.save = [mc](const std::string& path, const std::map<std::string, at::Tensor>& w) {
    models::LongSequenceAggregator out(mc);  // an aggregator file with its config: what embed-wsi / video load
    models::load_state_dict(*out, w);
    models::save_aggregator(path, out);
  };
  return c;
}

Classifier vit_classifier(const TrainConfig& cfg, const TrainOptions& opt, torch::Device dev, torch::ScalarType dtype) {
  models::ViTConfig vc = models::load_vit_config(cfg.model);
  vc.num_classes = int64_t(cfg.labels.size());
  auto train = std::make_shared<TileSet>(load_tiles(cfg.train, cfg.labels, vc.img_size));
  auto val = std::make_shared<TileSet>();
  if (opt.validate) *val = load_tiles(cfg.val, cfg.labels, vc.img_size);
  torch::manual_seed(cfg.seed);
  auto net = std::make_shared<models::VisionTransformerImpl>(vc);
  if (!cfg.pretrained.empty()) {
    // timm weights without their head: the class count is ours.
    models::KeyMapping km;
    km.prefix = cfg.pretrained_prefix;
    models::StateDict sd = models::remap_keys(models::safetensors::load(cfg.pretrained), km);
    for (auto it = sd.begin(); it != sd.end();) it = it->first.rfind("head.", 0) == 0 ? sd.erase(it) : std::next(it);
    sd = models::adapt_vit_checkpoint(std::move(sd), *net);  // Dinov2Model names, another position grid
    const auto report = models::load_state_dict(*net, sd, /*strict=*/false);
    if (!report.unexpected.empty() || report.loaded == 0)
      throw std::runtime_error(cfg.pretrained + ": not timm ViT weights for " + cfg.model + ": " + report.summary());
  }
  net->to(dev);
  Classifier c;
  c.module = net;
  c.val_items = opt.validate ? size_t(val->labels.size(0)) : 0;
  const std::vector<int> flips = cfg.augment.flip_axes;
  const double flip_prob = cfg.augment.flip_prob;
  c.train_batch = [=, &cfg](std::mt19937_64& gen) {
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<at::Tensor> imgs;
    std::vector<int64_t> labels;
    for (int64_t b = 0; b < cfg.optim.batch_size; ++b) {
      const int64_t i = int64_t(gen() % uint64_t(train->labels.size(0)));
      at::Tensor img = train->images[i];
      for (int a : flips)  // 0: x (width), 1: y (height); tiles have no up or left
        if (u(gen) < flip_prob) img = img.flip({a == 0 ? 2 : 1});
      imgs.push_back(img);
      labels.push_back(train->labels[i].item<int64_t>());
    }
    const at::Tensor x = normalize_tiles(at::stack(imgs)).to(dev, dtype);
    return std::make_pair(net->forward(x), torch::tensor(labels, torch::kLong).to(dev));
  };
  c.for_each_val = [=](const std::function<void(const at::Tensor&, const at::Tensor&)>& f) {
    const int64_t n = val->labels.size(0), chunk = 32;
    for (int64_t s = 0; s < n; s += chunk) {
      const int64_t len = std::min(chunk, n - s);
      f(net->forward(normalize_tiles(val->images.narrow(0, s, len)).to(dev, dtype)), val->labels.narrow(0, s, len));
    }
  };
  c.save = [vc, path_cfg = cfg.model](const std::string& path, const std::map<std::string, at::Tensor>& w) {
    models::safetensors::save(path, w, {{"model_config", path_cfg}, {"num_classes", std::to_string(vc.num_classes)}});
  };
  return c;
}

}  // namespace

TrainResult train_classification(const TrainConfig& cfg, const TrainOptions& opt, const TrainCallbacks& cb) {
  const auto t_start = Clock::now();
  const torch::Device dev(opt.device);
  if (dev.is_cuda() && !torch::cuda::is_available()) throw std::runtime_error("--device cuda: no CUDA device is available");
  const torch::ScalarType dtype = precision_dtype(opt.precision);
  if (dtype == torch::kHalf && !dev.is_cuda()) throw std::runtime_error("--precision fp16 needs --device cuda");
  AttentionScope attention(opt.attention);
  if (opt.out_dir.empty()) throw std::runtime_error("an output folder is required");
  fs::create_directories(opt.out_dir);

  if (cb.progress) cb.progress("train data", 0, 1);
  Classifier clf = cfg.model.empty() ? aggregator_classifier(cfg, opt, dev, dtype)
                   : models::config_model_kind(cfg.model) == "longnet_vit" ? slide_encoder_classifier(cfg, opt, dev, dtype)
                                                                            : vit_classifier(cfg, opt, dev, dtype);
  torch::nn::Module& net = *clf.module;
  MasterWeights state(net, dtype, cfg.optim);
  const int64_t start = resume_from(opt.resume, state, cfg.seed, cfg.optim.steps);

  std::vector<std::string> val_columns = {"val_balanced_accuracy", "val_accuracy"};
  for (const auto& l : cfg.labels) val_columns.push_back("val_recall_" + l);
  const bool phases = cfg.level == "token" && cfg.model.empty();  // each validation item is a video
  if (phases) val_columns.insert(val_columns.end(), {"val_phase_precision", "val_phase_recall", "val_phase_jaccard", "val_video_accuracy"});
  const Loop loop{cfg, opt, cb, state, net, "ce_loss", "unused", val_columns, {{"task", "classification"}},
                  [&](int64_t step) {
                    // The batch of step s depends on (seed, s) only: a resumed run draws the same one.
                    std::seed_seq seq{uint32_t(cfg.seed), uint32_t(cfg.seed >> 32), uint32_t(step), uint32_t(uint64_t(step) >> 32)};
                    std::mt19937_64 gen(seq);
                    const auto [logits, labels] = clf.train_batch(gen);
                    const at::Tensor loss = torch::nn::functional::cross_entropy(logits.to(torch::kFloat), labels);
                    return StepLoss{loss, loss.item<double>(), 0.0};
                  },
                  [&](int64_t steps_done) {
                    std::vector<double> hit(cfg.labels.size(), 0), count(cfg.labels.size(), 0);
                    std::vector<VideoPhaseScores> videos;
                    clf.for_each_val([&](const at::Tensor& logits, const at::Tensor& truth) {
                      const at::Tensor pred = logits.to(torch::kFloat).argmax(1).to(torch::kCPU).contiguous();
                      const auto t = truth.accessor<int64_t, 1>();
                      const auto g = pred.accessor<int64_t, 1>();
                      for (int64_t i = 0; i < t.size(0); ++i) count[t[i]] += 1, hit[t[i]] += g[i] == t[i];
                      if (phases) {
                        const at::Tensor tc = truth.contiguous();
                        videos.push_back(score_video({pred.data_ptr<int64_t>(), pred.data_ptr<int64_t>() + pred.numel()},
                                                     {tc.data_ptr<int64_t>(), tc.data_ptr<int64_t>() + tc.numel()},
                                                     int64_t(cfg.labels.size())));
                      }
                    });
                    ValStats v = score(hit, count, cfg, steps_done);
                    if (!videos.empty()) v.phases = average_videos(videos);
                    return v;
                  },
                  [](const ValStats& v) {
                    std::vector<double> cells = {v.mean, v.accuracy};
                    cells.insert(cells.end(), v.per_class.begin(), v.per_class.end());
                    if (v.phases)
                      cells.insert(cells.end(), {v.phases->precision.mean, v.phases->recall.mean, v.phases->jaccard.mean, v.phases->accuracy});
                    return cells;
                  }};
  TrainResult result = run_loop(loop, start);

  if (result.steps_done == cfg.optim.steps) {
    result.weights = (fs::path(opt.out_dir) / "model.safetensors").string();
    clf.save(result.weights, state.weights(torch::kFloat));
    nlohmann::json s = {{"task", "classification"}, {"model", cfg.model.empty() ? "aggregator" : cfg.model}, {"level", cfg.level}, {"steps", result.steps_done},
                        {"final_loss", result.last_step.loss}, {"labels", cfg.labels}, {"device", opt.device},
                        {"precision", opt.precision}, {"attention", opt.attention}};
    if (result.validated) {
      nlohmann::json per = nlohmann::json::object();
      for (size_t k = 0; k < result.last_val.per_class.size(); ++k)
        per[cfg.labels[k]] = std::isnan(result.last_val.per_class[k]) ? nlohmann::json(nullptr) : nlohmann::json(result.last_val.per_class[k]);
      s["val_recall"] = per;
      s["val_balanced_accuracy"] = result.last_val.mean;
      s["val_accuracy"] = result.last_val.accuracy;
      s["val_items"] = clf.val_items;
      if (result.last_val.phases) s["phase_metrics"] = phase_metrics_json(*result.last_val.phases, cfg.labels);
    }
    result.summary = (fs::path(opt.out_dir) / "summary.json").string();
    io::write_file_atomically(result.summary, s.dump(2) + "\n");
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
  return result;
}

}  // namespace tessera::train
