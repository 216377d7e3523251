// Small training configs for tests: tiny phantoms' worth of work on the CPU.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "tessera/train/train_config.h"

namespace tessera::train::testing {

// The folders temp_dir made, removed when the test program exits.
struct TempDirs {
  std::vector<std::filesystem::path> made;
  ~TempDirs() {
    std::error_code ec;
    for (const auto& d : made) std::filesystem::remove_all(d, ec);
  }
};

inline std::string temp_dir(const std::string& name) {
  static TempDirs dirs;
  const auto d = std::filesystem::temp_directory_path() / ("tessera_train_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  dirs.made.push_back(d);
  return d.string();
}

inline std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

// Swin UNETR feature size 12 on 32^3 crops of 4 mm phantoms: a step takes well under a second.
inline TrainConfig tiny_config(int64_t steps = 4) {
  TrainConfig c;
  c.path = "tiny";
  c.model = std::string(TESSERA_CONFIGS) + "/swin_unetr_phantom.yaml";
  c.labels = {"background", "liver", "spleen", "kidney_left", "kidney_right", "vertebra", "aorta"};
  c.seed = 3;
  c.train = {"phantom", "", 2, 11};
  c.val = {"phantom", "", 1, 99};
  c.preprocess.spacing = {4, 4, 5};
  c.crop.roi = {32, 32, 32};
  c.augment.flip_axes = {2};
  c.optim.steps = steps;
  c.optim.batch_size = 1;
  c.optim.warmup_steps = 1;
  c.validation.every = 0;
  c.validation.sw_batch = 2;
  return c;
}

}  // namespace tessera::train::testing
