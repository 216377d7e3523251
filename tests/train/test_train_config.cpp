// Training configs: the shipped one loads; every mistake is an error that
// names the file and the key.
#include <gtest/gtest.h>

#include "tessera/train/train_config.h"
#include "train_test_util.h"

namespace tessera::train {
namespace {

using testing::temp_dir;
using testing::write_file;

const char* kGood = R"(
task: segmentation
model: MODEL
labels: [background, liver]
train: {source: phantom, count: 2, seed: 1}
val: {source: phantom, count: 1, seed: 100}
crop: {roi: [32, 64, 96]}
optim: {steps: 10, warmup_steps: 2, lr: 0.01}
)";

std::string config_with(const std::string& dir, std::string text) {
  const auto at = text.find("MODEL");
  if (at != std::string::npos) text.replace(at, 5, std::string(TESSERA_CONFIGS) + "/swin_unetr_phantom.yaml");
  return write_file(dir + "/c.yaml", text);
}

void expect_error(const std::string& dir, const std::string& text, const std::string& needle) {
  const std::string path = config_with(dir, text);
  try {
    load_train_config(path);
    FAIL() << "accepted: " << text;
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
  }
}

TEST(TrainConfig, ShippedPhantomConfigLoads) {
  const TrainConfig c = load_train_config(std::string(TESSERA_CONFIGS) + "/train_phantom.yaml");
  EXPECT_EQ(c.labels.size(), 7u);
  EXPECT_EQ(c.train.source, "phantom");
  EXPECT_GT(c.train.count, 0);
  EXPECT_NE(c.train.seed, c.val.seed);
  EXPECT_EQ(c.crop.roi[0], 64);
  EXPECT_TRUE(c.augment.flip_axes.empty());
}

TEST(TrainConfig, ReadsEveryField) {
  const auto dir = temp_dir("cfg_ok");
  const TrainConfig c = load_train_config(config_with(dir, kGood));
  EXPECT_EQ(c.crop.roi[2], 96);
  EXPECT_EQ(c.optim.steps, 10);
  EXPECT_EQ(c.optim.warmup_steps, 2);
  EXPECT_DOUBLE_EQ(c.optim.lr, 0.01);
  EXPECT_EQ(c.val.seed, 100u);
}

TEST(TrainConfig, MistakesAreOneLineErrorsNamingFileAndKey) {
  const auto dir = temp_dir("cfg_bad");
  const std::string g = kGood;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = g;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  expect_error(dir, g + "optim_typo: 1\n", "unknown key `optim_typo`");
  expect_error(dir, with("lr: 0.01", "lr: 0.01, lrr: 2"), "unknown key `optim.lrr`");
  expect_error(dir, with("steps: 10", "steps: ten"), "`optim.steps` has the wrong type");
  expect_error(dir, with("[32, 64, 96]", "[32, 60, 96]"), "multiples of 32");
  expect_error(dir, with("steps: 10", "steps: 0"), "optim.steps");
  expect_error(dir, with("source: phantom, count: 2", "source: folder"), "train.path");
  expect_error(dir, with("source: phantom, count: 2", "source: bucket, count: 2"), "train.source");
  expect_error(dir, "labels: [a, b\n", "not valid YAML");
}

TEST(TrainConfig, LabelCountMustMatchTheModel) {
  // 3 labels against a 7-class model is caught when training starts; the
  // config itself only needs background + one class.
  const auto dir = temp_dir("cfg_one");
  expect_error(dir, std::string(kGood).replace(std::string(kGood).find("labels: [background, liver]"), 27, "labels: [background]"),
               "labels");
}

}  // namespace
}  // namespace tessera::train
