// Aggregator classification training over feature files: it learns a task a
// sequence model can learn (bag level from Trident .h5 files, token level from
// `tessera video` safetensors), resumes bit for bit, writes an aggregator
// file the apps load, and rejects bad manifests naming the file.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "tessera/io/features.h"
#include "tessera/models/aggregator.h"
#include "tessera/models/config.h"
#include "tessera/models/longnet.h"
#include "tessera/models/state_dict.h"
#include "tessera/models/safetensors.h"
#include "tessera/train/checkpoint.h"
#include "tessera/train/cls_trainer.h"
#include "train_test_util.h"
#if TESSERA_IO_HAS_HDF5
#include "tessera/io/features_h5.h"
#endif

namespace tessera::train {
namespace {

using testing::temp_dir;
using testing::write_file;

TrainConfig base_config(const std::string& dir, const std::string& level, const std::string& position) {
  TrainConfig c;
  c.path = dir + "/config";
  c.task = "classification";
  c.level = level;
  c.labels = {"benign", "tumour"};
  c.aggregator.dim = 32;
  c.aggregator.depth = 1;
  c.aggregator.num_heads = 2;
  c.aggregator.position = position;
  c.train = {"csv", dir + "/train.csv", 0, 0};
  c.val = {"csv", dir + "/val.csv", 0, 0};
  c.optim.steps = 40;
  c.optim.batch_size = 4;
  c.optim.lr = 3e-3;
  c.optim.warmup_steps = 4;
  c.validation.every = 0;
  c.seed = 9;
  return c;
}

// Slides as Trident .h5 files: class 1 slides hold some tiles whose feature 0 is high.
void write_slides(const std::string& dir, const std::string& split, int n, uint64_t seed) {
#if TESSERA_IO_HAS_HDF5
  torch::manual_seed(seed);
  std::string csv = "features,label\n";
  for (int i = 0; i < n; ++i) {
    const int label = i % 2;
    io::PatchFeatures f;
    f.n = 30 + 7 * i;
    f.dim = 8;
    at::Tensor x = torch::randn({f.n, f.dim});
    if (label) x.narrow(0, 0, 10).select(1, 0).add_(4.0);  // a tumour region: 10 tiles stand out
    f.features.assign(x.data_ptr<float>(), x.data_ptr<float>() + x.numel());
    for (int64_t t = 0; t < f.n; ++t) f.coords.insert(f.coords.end(), {256 * (t % 6), 256 * (t / 6)});
    f.patch_size = f.patch_size_level0 = 256;
    f.level0_width = f.level0_height = 4096;
    f.target_mpp = f.level0_mpp = 0.5;
    f.name = split + std::to_string(i);
    io::write_patch_features(dir + "/" + f.name + ".h5", f);
    csv += f.name + ".h5," + (label ? "tumour" : "benign") + "\n";
  }
  write_file(dir + "/" + split + ".csv", csv);
#endif
}

TEST(Classification, BagLevelLearnsFromTridentFeatures) {
  if (!TESSERA_IO_HAS_HDF5) GTEST_SKIP() << "built without HDF5";
  const auto dir = temp_dir("cls_bag");
  write_slides(dir, "train", 16, 1);
  write_slides(dir, "val", 8, 2);
  TrainOptions o;
  o.out_dir = dir + "/run";
  TrainConfig c = base_config(dir, "bag", "rope2d");
  c.optim.steps = 150;
  const TrainResult r = train_classification(c, o);
  ASSERT_TRUE(r.validated);
  EXPECT_GE(r.last_val.mean, 0.99) << "balanced accuracy";
  EXPECT_EQ(r.last_val.per_class.size(), 2u);
  // The apps load the result as an aggregator with a pooled head.
  models::LongSequenceAggregator m = models::load_aggregator(r.weights);
  EXPECT_TRUE(m->config().pooled_head);
  EXPECT_EQ(m->config().num_classes, 2);
}

// Six videos of 20 to 25 s (4 train, 2 val): per-second embeddings [T, 6], the phase of a second the
// sign of its feature 1. `labels(name, e)` writes a video's label file and returns its name.
void write_videos(const std::string& dir, uint64_t seed, const std::function<std::string(const std::string&, const at::Tensor&)>& labels) {
  std::string train_csv = "features,label\n", val_csv = train_csv;
  torch::manual_seed(seed);
  for (int i = 0; i < 6; ++i) {
    const int64_t T = 20 + i;
    const at::Tensor e = torch::randn({T, 6});
    const std::string name = "video" + std::to_string(i);
    models::safetensors::save(dir + "/" + name + "_embeddings.safetensors",
                              {{"embeddings", e}, {"seconds", torch::arange(T, torch::kFloat)}});
    (i < 4 ? train_csv : val_csv) += name + "_embeddings.safetensors," + labels(name, e) + "\n";
  }
  write_file(dir + "/train.csv", train_csv);
  write_file(dir + "/val.csv", val_csv);
}

TEST(Classification, TokenLevelFromVideoEmbeddingsResumesExactly) {
  const auto dir = temp_dir("cls_token");
  write_videos(dir, 4, [&](const std::string& name, const at::Tensor& e) {
    std::string labels = "second,phase_id,phase\n";
    for (int64_t t = 0; t < e.size(0); ++t)
      labels += std::to_string(t) + (e[t][1].item<float>() > 0 ? ",1,tumour\n" : ",0,benign\n");
    write_file(dir + "/" + name + "_phases.csv", labels);
    return name + "_phases.csv";
  });
  TrainConfig c = base_config(dir, "token", "rope1d");
  c.optim.steps = 30;
  TrainOptions straight;
  straight.out_dir = dir + "/a";
  const TrainResult a = train_classification(c, straight);
  EXPECT_GE(a.last_val.accuracy, 0.9);
  TrainOptions first = straight;
  first.out_dir = dir + "/b";
  first.stop_after = 12;
  train_classification(c, first);
  TrainOptions second = first;
  second.stop_after = -1;
  second.resume = dir + "/b/checkpoint.safetensors";
  const TrainResult b = train_classification(c, second);
  const Checkpoint ca = load_checkpoint(a.checkpoint), cb = load_checkpoint(b.checkpoint);
  ASSERT_EQ(ca.model.size(), cb.model.size());
  for (const auto& [k, t] : ca.model) EXPECT_TRUE(torch::equal(t, cb.model.at(k))) << k;
  for (const auto& [k, t] : ca.exp_avg_sq) EXPECT_TRUE(torch::equal(t, cb.exp_avg_sq.at(k))) << k;
  EXPECT_FALSE(models::load_aggregator(a.weights)->config().pooled_head);
}

// Cholec80-style labels: a frame-level annotation at 25 fps per video (Frame<TAB>Phase), the
// phase changing inside seconds, resampled to the embedded seconds by majority; one video's
// annotation stops a second short (its last embedded second is left out), another's runs a second
// long. Validation writes per-phase precision, recall and Jaccard to summary.json and metrics.csv.
TEST(Classification, TokenLevelFromCholec80Annotations) {
  const auto dir = temp_dir("cls_cholec80");
  const std::vector<std::string> phases = {"Preparation", "CalotTriangleDissection"};
  write_videos(dir, 5, [&](const std::string& name, const at::Tensor& e) {
    const int64_t T = e.size(0);
    auto phase = [&](int64_t t) { return phases[e[std::min(t, T - 1)][1].item<float>() > 0 ? 1 : 0]; };
    const int64_t annotated = name == "video1" ? T - 1 : name == "video2" ? T + 1 : T;
    std::string txt = "Frame\tPhase\n";
    for (int64_t f = 0; f < annotated * 25; ++f)  // the first 10 frames of a second still show the previous phase
      txt += std::to_string(f) + "\t" + phase(f % 25 < 10 && f >= 25 ? f / 25 - 1 : f / 25) + "\n";
    write_file(dir + "/" + name + "-phase.txt", txt);
    return name + "-phase.txt";
  });
  TrainConfig c = base_config(dir, "token", "rope1d");
  c.labels = phases;
  c.optim.steps = 30;
  TrainOptions o;
  o.out_dir = dir + "/run";
  const TrainResult r = train_classification(c, o);
  ASSERT_TRUE(r.validated && r.last_val.phases);
  const PhaseMetrics& m = *r.last_val.phases;
  EXPECT_EQ(m.videos, 2);
  EXPECT_EQ(m.seconds, 24 + 25);
  for (const auto* metric : {&m.precision, &m.recall, &m.jaccard}) {
    ASSERT_EQ(metric->per_phase.size(), 2u);
    for (double v : metric->per_phase) EXPECT_TRUE(v >= 0 && v <= 1) << v;
  }
  EXPECT_GE(m.jaccard.mean, 0.7);
  EXPECT_GE(m.accuracy, 0.85);
  std::ifstream summary(r.summary);
  const auto s = nlohmann::json::parse(summary);
  EXPECT_EQ(s["phase_metrics"]["videos"].get<int>(), 2);
  EXPECT_TRUE(s["phase_metrics"]["recall"]["per_phase"].contains("CalotTriangleDissection"));
  std::ifstream metrics(r.metrics);
  std::string header;
  std::getline(metrics, header);
  EXPECT_NE(header.find("val_phase_precision,val_phase_recall,val_phase_jaccard,val_video_accuracy"), std::string::npos) << header;

  write_file(dir + "/video5-phase.txt", "Frame\tPhase\n0\tPreparation\n1\tClippingCutting\n");
  try {
    train_classification(c, o);
    FAIL() << "an unknown phase name";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("video5-phase.txt line 3: label `ClippingCutting`"), std::string::npos) << e.what();
  }
}

// GigaPath's slide encoder fine-tuned with a head: it starts from the given encoder weights
// (a step at a vanishing learning rate leaves them), learns the slide task, and saves a file
// whose "slide_encoder." weights load back into the encoder as embed-wsi loads them.
TEST(Classification, SlideEncoderFineTunesFromItsWeights) {
  if (!TESSERA_IO_HAS_HDF5) GTEST_SKIP() << "built without HDF5";
  const auto dir = temp_dir("cls_slide_encoder");
  write_slides(dir, "train", 16, 1);
  write_slides(dir, "val", 8, 2);
  write_file(dir + "/slide_enc.yaml",
             "model: longnet_vit\nin_chans: 8\nembed_dim: 32\ndepth: 1\nnum_heads: 4\nslide_ngrids: 64\n"
             "segment_length: [16, 64]\ndilated_ratio: [1, 2]\n");
  const models::LongNetViTConfig lc = models::load_longnet_vit_config(dir + "/slide_enc.yaml");
  torch::manual_seed(3);
  models::LongNetViT start(lc);
  models::safetensors::save(dir + "/slide_encoder.safetensors", models::state_dict(*start));
  TrainConfig c = base_config(dir, "bag", "rope2d");
  c.model = dir + "/slide_enc.yaml";
  c.pretrained = dir + "/slide_encoder.safetensors";
  TrainOptions o;
  o.out_dir = dir + "/one_step";
  c.optim.steps = 1;
  c.optim.warmup_steps = 0;
  c.optim.lr = c.optim.min_lr = 1e-9;
  const TrainResult first = train_classification(c, o);
  models::LongNetViT loaded(lc);
  models::KeyMapping km;
  km.prefix = "slide_encoder.";
  EXPECT_TRUE(models::load_longnet_vit_weights(*loaded, {first.weights}, km).complete());
  for (const auto& [k, t] : models::state_dict(*start))
    EXPECT_LT((models::state_dict(*loaded).at(k) - t).abs().max().item<double>(), 1e-6) << k;

  c.optim.steps = 150;
  c.optim.warmup_steps = 4;
  c.optim.lr = 3e-3;
  c.optim.min_lr = 1e-5;
  o.out_dir = dir + "/run";
  const TrainResult r = train_classification(c, o);
  ASSERT_TRUE(r.validated);
  EXPECT_GE(r.last_val.mean, 0.99) << "balanced accuracy";
  EXPECT_EQ(models::safetensors::load(r.weights).count("head.weight"), 1u);

  c.level = "token";  // a slide encoder has one output per slide
  EXPECT_THROW(c.validate(), std::runtime_error);
}

TEST(Classification, BadManifestsNameTheFile) {
  const auto dir = temp_dir("cls_bad");
  models::safetensors::save(dir + "/v.safetensors", {{"embeddings", torch::randn({5, 4})}, {"seconds", torch::arange(5, torch::kFloat)}});
  write_file(dir + "/train.csv", "features,label\nv.safetensors,malignant\n");
  write_file(dir + "/val.csv", "features,label\nv.safetensors,benign\n");
  TrainOptions o;
  o.out_dir = dir + "/run";
  auto expect = [&](const TrainConfig& c, const std::string& needle) {
    try {
      train_classification(c, o);
      FAIL() << needle;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect(base_config(dir, "bag", "rope1d"), "train.csv: label `malignant` is neither a class name");
  write_file(dir + "/train.csv", "features,label\nv.safetensors,tumour\n");
  expect(base_config(dir, "bag", "rope2d"), "-D positions; aggregator.position needs 2");
  write_file(dir + "/train.csv", "feature,label\nv.safetensors,tumour\n");
  expect(base_config(dir, "bag", "rope1d"), "train.csv: the header must name columns `features`, `label`");
  write_file(dir + "/train.csv", "features,label\nv.npy,tumour\n");
  expect(base_config(dir, "bag", "rope1d"), "v.npy: feature files are .h5");
}

}  // namespace
}  // namespace tessera::train
