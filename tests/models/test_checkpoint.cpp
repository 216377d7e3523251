// load_checkpoint against files written by PyTorch itself (Debian's
// /usr/bin/python3 with python3-torch, run once by make_torch_checkpoints.py):
// every tensor must equal what Python saved, bit for bit, under the name the
// loader promises; hostile pickles must be refused without running anything;
// broken files must give one line naming the file.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "tessera/models/checkpoint.h"
#include "tessera/models/state_dict.h"

namespace {

namespace fs = std::filesystem;
namespace tm = tessera::models;

class Checkpoint : public ::testing::Test {
 protected:
  // Written once per build and script version (ctest runs each test in its own
  // process): into a temporary folder, then renamed, so parallel tests never see half a set.
  static void SetUpTestSuite() {
    if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
      skip_ = "/usr/bin/python3 cannot import torch (install python3-torch)";
      return;
    }
    const fs::path script = TESSERA_TESTS_MODELS_DIR "/make_torch_checkpoints.py";
    const auto stamp = fs::last_write_time(script).time_since_epoch().count() ^ fs::file_size(script);
    dir_ = fs::path(TESSERA_TESTS_BUILD_DIR) / ("torch_checkpoints_" + std::to_string(stamp));
    marker_ = (dir_ / "MARKER_pickle_code_ran").string();
    scratch_ = fs::temp_directory_path() / ("tessera_ckpt_" + std::to_string(::getpid()));
    fs::create_directories(scratch_);
    if (fs::exists(dir_)) return;
    const fs::path tmp = dir_.string() + ".tmp" + std::to_string(::getpid());
    const std::string cmd = "/usr/bin/python3 " + script.string() + " " + tmp.string() + " " + marker_;
    if (std::system(cmd.c_str()) != 0) {
      skip_ = "make_torch_checkpoints.py failed: " + cmd;
      return;
    }
    std::error_code ec;
    fs::rename(tmp, dir_, ec);  // another process may have won: its set is as good
    fs::remove_all(tmp, ec);
  }
  static void TearDownTestSuite() { fs::remove_all(scratch_); }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
  }

  // Generated files (read only) and this process's own scratch files.
  static std::string file(const std::string& name) { return (dir_ / name).string(); }
  static std::string scratch(const std::string& name) { return (scratch_ / name).string(); }

  // Loads NAME.pt and compares it, name by name and bit for bit, with NAME.expected.safetensors.
  static tm::CheckpointReport expect_same_as_python(const std::string& name, const tm::CheckpointOptions& o = {}) {
    tm::CheckpointReport report;
    const auto got = tm::load_checkpoint(file(name + ".pt"), o, &report);
    const auto want = tm::safetensors::load(file(name + ".expected.safetensors"));
    EXPECT_EQ(got.size(), want.size()) << name;
    for (const auto& [key, t] : want) {
      const auto it = got.find(key);
      if (it == got.end()) {
        ADD_FAILURE() << name << ": missing " << key;
        continue;
      }
      EXPECT_EQ(it->second.scalar_type(), t.scalar_type()) << name << ": " << key;
      EXPECT_EQ(it->second.sizes(), t.sizes()) << name << ": " << key;
      EXPECT_TRUE(it->second.is_contiguous()) << name << ": " << key;
      EXPECT_TRUE(torch::equal(it->second, t)) << name << ": " << key;
    }
    EXPECT_EQ(report.format, tm::CheckpointFormat::kPyTorchZip);
    EXPECT_EQ(report.tensors, got.size());
    return report;
  }

  // Loading must fail with one line that names the file and says `what`.
  static void expect_error(const std::string& name, const std::string& what, const tm::CheckpointOptions& o = {}) {
    const std::string p = name.front() == '/' ? name : file(name);
    try {
      tm::load_checkpoint(p, o);
      ADD_FAILURE() << "no error for " << p << " (expected '" << what << "')";
    } catch (const tm::FormatError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(p), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
    }
  }

  static bool has(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  }

  static inline fs::path dir_, scratch_;
  static inline std::string marker_, skip_;
};

TEST_F(Checkpoint, FlatStateDictWithBatchNormBuffers) {
  const auto r = expect_same_as_python("flat");
  EXPECT_EQ(r.key, "");
  EXPECT_EQ(r.prefix, "");
  EXPECT_TRUE(r.skipped.empty()) << r.summary();
}

TEST_F(Checkpoint, UnwrapsStateDictAndListsWhatIsSkipped) {
  const auto r = expect_same_as_python("nested");
  EXPECT_EQ(r.key, "state_dict");
  EXPECT_TRUE(r.key_from_unwrap);
  for (const char* s : {"epoch (int)", "lr (float)", "arch (str)", "best (None)", "done (bool)"})
    EXPECT_TRUE(has(r.skipped, s)) << s << " in " << r.summary();
}

TEST_F(Checkpoint, UnwrapsModelBesideAnOptimizer) {
  const auto r = expect_same_as_python("model_optim");
  EXPECT_EQ(r.key, "model");
  EXPECT_TRUE(has(r.skipped, "optimizer (dict)")) << r.summary();
  EXPECT_TRUE(has(r.skipped, "epoch (int)")) << r.summary();
}

TEST_F(Checkpoint, StripsModulePrefix) {
  const auto r = expect_same_as_python("module_prefix");
  EXPECT_EQ(r.prefix, "module.");
  tm::CheckpointOptions keep;
  keep.strip_prefix = false;
  const auto raw = tm::load_checkpoint(file("module_prefix.pt"), keep);
  EXPECT_TRUE(raw.count("module.conv.weight"));
}

TEST_F(Checkpoint, EveryDtypeZeroDimAndEmptyTensors) { expect_same_as_python("dtypes"); }

TEST_F(Checkpoint, ViewsSharingOneStorageReadTheirOwnElements) { expect_same_as_python("views"); }

TEST_F(Checkpoint, ParametersAreTheirData) { expect_same_as_python("params"); }

TEST_F(Checkpoint, NestedDictsAndListsFlattenWithDots) {
  const auto r = expect_same_as_python("deep");
  EXPECT_TRUE(has(r.skipped, "steps (int)")) << r.summary();
}

TEST_F(Checkpoint, ExplicitKeysPickSubDictionaries) {
  tm::CheckpointOptions o;
  o.key = "state_dict";
  const auto r = expect_same_as_python("nested", o);
  EXPECT_FALSE(r.key_from_unwrap);
  o.key = "optimizer.state";  // dotted path; int keys become names
  const auto moments = tm::load_checkpoint(file("model_optim.pt"), o);
  EXPECT_TRUE(moments.count("4.exp_avg") && moments.count("5.exp_avg_sq")) << moments.size();  // the head's moments
  o.key = "nothing";
  expect_error("nested.pt", "no entry 'nothing' at the top level (keys: state_dict, epoch", o);
  tm::CheckpointOptions whole;
  whole.unwrap = false;
  tm::CheckpointReport r2;
  const auto all = tm::load_checkpoint(file("nested.pt"), whole, &r2);
  EXPECT_TRUE(all.count("state_dict.conv.weight"));
  EXPECT_TRUE(has(r2.skipped, "epoch (int)")) << r2.summary();
}

TEST_F(Checkpoint, LoadWeightsAcceptsPyTorchFiles) {
  struct NetImpl : torch::nn::Module {
    NetImpl() {
      register_module("conv", torch::nn::Conv2d(3, 4, 3));
      register_module("bn", torch::nn::BatchNorm2d(4));
      register_module("head", torch::nn::Linear(4, 2));
    }
  };
  NetImpl net;
  const auto r = tm::load_weights(net, {file("module_prefix.pt")});
  EXPECT_TRUE(r.complete()) << r.summary();
  const auto want = tm::safetensors::load(file("flat.expected.safetensors"));
  EXPECT_TRUE(torch::equal(tm::state_dict(net).at("head.weight"), want.at("head.weight")));
  // An explicit prefix is honoured as given (no automatic strip underneath it).
  tm::KeyMapping km;
  km.prefix = "module.";
  EXPECT_TRUE(tm::load_weights(net, {file("module_prefix.pt")}, km).complete());
}

TEST_F(Checkpoint, RefusesHostilePicklesWithoutRunningThem) {
  expect_error("hostile_os_system.pt", "refusing to call posix.system");
  // Protocol 2 writes Python 2 module names (pickle's fix_imports): builtins -> __builtin__, subprocess -> commands.
  expect_error("hostile_eval.pt", "refusing to call __builtin__.eval");
  expect_error("hostile_popen.pt", "refusing to call commands.Popen");
  expect_error("raw_posix.pt", "refusing to call posix.system");
  EXPECT_FALSE(fs::exists(marker_)) << "a pickle's code ran and created " << marker_;
}

TEST_F(Checkpoint, RefusesLegacyAndTorchScriptWithHowToConvert) {
  expect_error("legacy.pt", "legacy (torch < 1.6)");
  expect_error("legacy.pt", "torch.save(torch.load('" + file("legacy.pt") + "'), 'new.pt')");
  EXPECT_EQ(tm::detect_checkpoint_format(file("legacy.pt")), tm::CheckpointFormat::kPyTorchLegacy);
  expect_error("scripted.pt", "TorchScript archive");
}

TEST_F(Checkpoint, CraftedArchives) {
  // Records without alignment padding, under another folder name: read where the local headers say.
  auto t = tm::load_checkpoint(file("unaligned.pt"));
  EXPECT_TRUE(torch::equal(t.at("w"), torch::tensor({2.0f, 4.0f})));
  t = tm::load_checkpoint(file("big_endian.pt"));
  EXPECT_TRUE(torch::equal(t.at("w"), torch::tensor({1.0f, 2.0f, 3.0f, 4.0f}).view({2, 2})));
  expect_error("extent.pt", "tensor 'w': tensor reaches element 4 of storage '0', which holds 4");
  expect_error("short_storage.pt", "storage '0' holds 12 bytes, but the pickle says 4 elements");
  expect_error("huge_length.pt", "data.pkl: byte 2: a length of 2147483647 runs past the end");
  expect_error("no_stop.pt", "ends without STOP");
}

TEST_F(Checkpoint, TruncatedAndCorruptArchives) {
  const auto good = file("flat.pt");
  const auto size = fs::file_size(good);
  for (uint64_t keep : {size - 1, size - 30, size / 2, uint64_t{100}, uint64_t{3}}) {
    const auto cut = scratch("cut.pt");
    fs::copy_file(good, cut, fs::copy_options::overwrite_existing);
    fs::resize_file(cut, keep);
    SCOPED_TRACE(keep);
    expect_error(cut, keep < 4 ? "not a checkpoint" : "zip");
  }
  // One flipped bit in a storage record: the CRC says so.
  const auto bad = scratch("flipped.pt");
  fs::copy_file(good, bad, fs::copy_options::overwrite_existing);
  {
    std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(1100);  // inside data/0 (the conv weight), past its alignment padding
    const char c = static_cast<char>(f.get() ^ 0x10);
    f.seekp(1100);
    f.put(c);
  }
  expect_error(bad, "fails its CRC-32 check");
}

TEST_F(Checkpoint, ShardedBinWithAnIndex) {
  tm::CheckpointReport r;
  const auto got = tm::load_checkpoint(file("pytorch_model.bin.index.json"), {}, &r);
  const auto want = tm::safetensors::load(file("flat.expected.safetensors"));
  EXPECT_EQ(r.files.size(), 2u);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [k, t] : want) EXPECT_TRUE(torch::equal(got.at(k), t)) << k;
  // The same name in two shards names both files.
  const std::vector<std::string> twice = {file("flat.pt"), file("pytorch_model-00001-of-00002.bin")};
  try {
    tm::load_checkpoint(twice);
    ADD_FAILURE() << "no error for a tensor in two shards";
  } catch (const tm::FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("is in two shards: " + twice[0] + " and " + twice[1]), std::string::npos)
        << e.what();
  }
}

TEST_F(Checkpoint, SafetensorsLoadAsBefore) {
  const auto p = file("flat.expected.safetensors");
  tm::CheckpointReport r;
  const auto got = tm::load_checkpoint(p, {}, &r);
  const auto want = tm::safetensors::load(p);
  EXPECT_EQ(r.format, tm::CheckpointFormat::kSafetensors);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [k, t] : want) EXPECT_TRUE(torch::equal(got.at(k), t)) << k;
  // A key on a flat file is a name prefix.
  tm::safetensors::save(scratch("wrapped.safetensors"), {{"model.a", torch::ones(2)}, {"ema.a", torch::zeros(2)}});
  tm::CheckpointOptions o;
  o.key = "model";
  const auto m = tm::load_checkpoint(scratch("wrapped.safetensors"), o);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_TRUE(torch::equal(m.at("a"), torch::ones(2)));
}

// The committed views.pt (fixtures/checkpoints/README.md), without Python: views of one storage come back as the
// views they were (a transpose, an offset row), each its own contiguous tensor, under the unwrapped "model" key.
TEST(CheckpointFixture, ViewsOfOneStorageComeBackAsTheirViews) {
  tm::CheckpointReport r;
  const auto s = tm::load_checkpoint(TESSERA_TESTS_MODELS_DIR "/fixtures/checkpoints/views.pt", {}, &r);
  EXPECT_EQ(r.key, "model");
  ASSERT_EQ(s.size(), 7u);
  const auto& w = s.at("blocks.0.weight");
  EXPECT_EQ(w.sizes(), (std::vector<int64_t>{6, 5}));
  EXPECT_TRUE(torch::equal(s.at("blocks.0.weight_t"), w.t()));
  EXPECT_TRUE(s.at("blocks.0.weight_t").is_contiguous());
  EXPECT_TRUE(torch::equal(s.at("blocks.0.row"), w[2].slice(0, 1, 4)));
  EXPECT_EQ(s.at("blocks.1.bias").scalar_type(), torch::kBFloat16);
  EXPECT_EQ(s.at("blocks.1.scale").scalar_type(), torch::kHalf);
  EXPECT_TRUE(torch::equal(s.at("index"), torch::arange(9, torch::kLong).reshape({3, 3})));
  EXPECT_EQ(s.at("empty").sizes(), (std::vector<int64_t>{0, 4}));
}

}  // namespace
