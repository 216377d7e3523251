// ViT tile classification: a timm ViT trained on an ImageFolder of tiles
// learns a task it can learn (stained vs pale tiles), starts from pretrained
// timm weights with its head replaced, and rejects foreign weights.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "tessera/io/features.h"
#include "tessera/models/safetensors.h"
#include "tessera/train/cls_trainer.h"
#include "train_test_util.h"
#if TESSERA_IO_HAS_OPENCV
#include "tessera/io/image_file.h"
#endif

namespace tessera::train {
namespace {

using testing::temp_dir;
using testing::write_file;

#if TESSERA_IO_HAS_OPENCV
// Tiles of two classes: purple-stained (tumour) or pale (stroma), with noise; sizes vary (resized on load).
void write_tiles(const std::string& dir, int per_class, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> noise(0.f, 25.f);
  for (const std::string cls : {"stroma", "tumour"}) {
    std::filesystem::create_directories(dir + "/" + cls);
    for (int i = 0; i < per_class; ++i) {
      const int size = 40 + 4 * (i % 3);
      io::RgbImage img(size, size);
      const float base[2][3] = {{235, 200, 220}, {120, 60, 150}};
      const int c = cls == "tumour";
      for (int y = 0; y < size; ++y)
        for (int x = 0; x < size; ++x)
          for (int k = 0; k < 3; ++k)
            img.pixel(x, y)[k] = uint8_t(std::clamp(base[c][k] + noise(gen), 0.f, 255.f));
      io::write_image(dir + "/" + cls + "/tile" + std::to_string(i) + ".png", img);
    }
  }
}
#endif

TrainConfig vit_config(const std::string& dir) {
  TrainConfig c;
  c.path = dir + "/config";
  c.task = "classification";
  c.model = write_file(dir + "/vit_micro.yaml",
                       "model: vit\nimg_size: 32\npatch_size: 8\nembed_dim: 32\ndepth: 1\nnum_heads: 2\nglobal_pool: token\n");
  c.labels = {"stroma", "tumour"};
  c.train = {"folder", dir + "/train", 0, 0};
  c.val = {"folder", dir + "/val", 0, 0};
  c.augment.flip_axes = {0, 1};
  c.optim.steps = 30;
  c.optim.batch_size = 8;
  c.optim.lr = 2e-3;
  c.optim.warmup_steps = 3;
  c.validation.every = 0;
  c.seed = 5;
  return c;
}

TEST(VitClassification, LearnsTilesAndFineTunesFromPretrainedWeights) {
  if (!TESSERA_IO_HAS_OPENCV) GTEST_SKIP() << "built without OpenCV: no image files";
#if TESSERA_IO_HAS_OPENCV
  const auto dir = temp_dir("vit_cls");
  write_tiles(dir + "/train", 12, 1);
  write_tiles(dir + "/val", 6, 2);
  TrainOptions o;
  o.out_dir = dir + "/run";
  const TrainConfig c = vit_config(dir);
  const TrainResult r = train_classification(c, o);
  ASSERT_TRUE(r.validated);
  EXPECT_GE(r.last_val.accuracy, 0.95);
  const auto w = models::safetensors::load(r.weights);
  ASSERT_TRUE(w.count("head.weight"));
  EXPECT_EQ(w.at("head.weight").size(0), 2);
  // Fine-tune from those weights saved as a timm checkpoint under a prefix, with three classes:
  // everything but the head loads.
  models::StateDict prefixed;
  for (const auto& [k, t] : w) prefixed["weights." + k] = t;
  models::safetensors::save(dir + "/timm.safetensors", prefixed);
  TrainConfig ft = c;
  ft.labels = {"stroma", "tumour", "necrosis"};
  ft.pretrained = dir + "/timm.safetensors";
  ft.pretrained_prefix = "weights.";
  ft.optim.steps = 2;
  o.out_dir = dir + "/ft";
  const TrainResult f = train_classification(ft, o);
  EXPECT_EQ(models::safetensors::load(f.weights).at("head.weight").size(0), 3);
  // Weights of another model are refused, naming the file.
  models::safetensors::save(dir + "/other.safetensors", {{"encoder.weight", torch::zeros({2, 2})}});
  ft.pretrained = dir + "/other.safetensors";
  ft.pretrained_prefix = "";
  try {
    train_classification(ft, o);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("other.safetensors: not timm ViT weights"), std::string::npos) << e.what();
  }
#endif
}

}  // namespace
}  // namespace tessera::train
