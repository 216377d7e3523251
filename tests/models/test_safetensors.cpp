// The safetensors reader/writer against the format spec: round trips of every
// dtype LibTorch has, sharded checkpoints, and malformed files, each of which
// must give one clear line naming the file and the problem.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tessera/models/safetensors.h"

namespace {

namespace fs = std::filesystem;
namespace st = tessera::models::safetensors;
using tessera::models::StateDict;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_st_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A file with the given header JSON and data bytes; `length` overrides N.
  std::string raw(const std::string& name, const std::string& json, const std::string& data,
                  std::optional<uint64_t> length = std::nullopt) const {
    const auto p = path(name);
    std::ofstream out(p, std::ios::binary);
    const uint64_t n = length.value_or(json.size());
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
    out << json << data;
    return p;
  }

  // Expects loading `p` to fail with one line that names the file and contains `what`.
  void expect_error(const std::string& p, const std::string& what) const {
    try {
      st::load(p);
      ADD_FAILURE() << "no error for " << p << " (expected '" << what << "')";
    } catch (const st::FormatError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(p), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
    }
  }

  fs::path dir_;
};

StateDict every_dtype() {
  torch::manual_seed(0);
  StateDict s;
  s["f32"] = torch::randn({3, 4});
  s["f16"] = torch::randn({5}).to(torch::kHalf);
  s["bf16"] = torch::randn({2, 2, 2}).to(torch::kBFloat16);
  s["f64"] = torch::randn({7}, torch::kDouble);
  s["i64"] = torch::arange(-5, 6, torch::kLong);
  s["i32"] = torch::arange(0, 9, torch::kInt).view({3, 3});
  s["i16"] = torch::arange(-3, 3, torch::kShort);
  s["i8"] = torch::arange(-4, 4, torch::kChar);
  s["u8"] = torch::arange(0, 250, 7).to(torch::kByte);
  s["bool"] = torch::rand({9}) > 0.5;
  s["scalar"] = torch::tensor(3.5);
  s["empty"] = torch::zeros({0, 4});
  s["strided"] = torch::randn({4, 6}).t();  // non-contiguous input is written contiguously
  return s;
}

TEST_F(Safetensors, RoundTripsEveryDtypeWithMetadata) {
  const auto s = every_dtype();
  const auto p = path("all.safetensors");
  st::save(p, s, {{"format", "pt"}, {"note", "round trip"}});
  const auto back = st::load(p);
  ASSERT_EQ(back.size(), s.size());
  for (const auto& [name, t] : s) {
    ASSERT_TRUE(back.count(name)) << name;
    EXPECT_EQ(back.at(name).scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(back.at(name).sizes(), t.sizes()) << name;
    EXPECT_TRUE(torch::equal(back.at(name), t.contiguous())) << name;
  }
  const auto meta = st::metadata(p);
  EXPECT_EQ(meta.at("format"), "pt");
  EXPECT_EQ(meta.at("note"), "round trip");
  // The reference writer pads the header so the data section starts 8-byte aligned.
  EXPECT_EQ(st::File(p).header().data_start() % 8, 0u);
  // Nothing but the final file is left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(Safetensors, ReadsAHandWrittenFileBitExactly) {
  // 1.0f and 2.0f little-endian, then two bytes of U8.
  const std::string data("\x00\x00\x80\x3f\x00\x00\x00\x40\x07\x09", 10);
  const auto p = raw("hand.safetensors",
                     R"({"b":{"dtype":"U8","shape":[1,2],"data_offsets":[8,10]},)"
                     R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}})",
                     data);
  st::File f(p);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"a", "b"}));  // in offset order
  EXPECT_TRUE(torch::equal(f.tensor("a"), torch::tensor({1.0f, 2.0f})));
  EXPECT_TRUE(torch::equal(f.tensor("b"), torch::tensor({7, 9}, torch::kByte).view({1, 2})));
  EXPECT_EQ(f.header().metadata.at("k"), "v");
  EXPECT_THROW(f.tensor("c"), st::FormatError);
}

TEST_F(Safetensors, RejectsTruncatedFiles) {
  const auto good = path("good.safetensors");
  st::save(good, {{"w", torch::randn({16})}});
  const auto size = fs::file_size(good);
  const auto cut = path("cut.safetensors");
  fs::copy_file(good, cut);
  fs::resize_file(cut, size - 3);
  expect_error(cut, "truncated");
  fs::resize_file(cut, 5);
  expect_error(cut, "shorter than the 8-byte header length");
  fs::resize_file(cut, 20);  // inside the header
  expect_error(cut, "runs past the end");
}

TEST_F(Safetensors, RejectsBadHeaderLengths) {
  const std::string j = R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  expect_error(raw("long.safetensors", j, "x", j.size() + 100), "runs past the end");
  expect_error(raw("huge.safetensors", j, "x", uint64_t{1} << 62), "exceeds");
  expect_error(raw("zero.safetensors", j, "x", 0), "header length is 0");
}

TEST_F(Safetensors, RejectsInvalidHeaderJson) {
  expect_error(raw("json.safetensors", R"({"a":{"dtype":"U8",)", ""), "not valid JSON");
  expect_error(raw("array.safetensors", "[1,2]", ""), "must be an object");
  expect_error(raw("dup.safetensors",
                   R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                   "xy"),
               "duplicate key");
  expect_error(raw("deep.safetensors", R"({"a":{"dtype":"U8","shape":[[[1]]],"data_offsets":[0,1]}})", "x"), "nests deeper");
  expect_error(raw("meta.safetensors", R"({"__metadata__":{"k":1}})", ""), "not a string");
  expect_error(raw("field.safetensors", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":0}})", "x"), "unknown field");
  expect_error(raw("nofield.safetensors", R"({"a":{"dtype":"U8","shape":[1]}})", "x"), "needs dtype, shape and data_offsets");
}

TEST_F(Safetensors, RejectsOffsetsOutsideOrAcrossTensors) {
  expect_error(raw("beyond.safetensors", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "12345678"),
               "run past");
  expect_error(raw("overlap.safetensors",
                   R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                   "12345678"),
               "overlap");
  expect_error(raw("hole.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", "12345678"),
               "belong to no tensor");
  expect_error(raw("trailing.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "12345678"),
               "cover 4");
  expect_error(raw("reversed.safetensors", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", "12345678"),
               "end before begin");
}

TEST_F(Safetensors, RejectsDtypeAndShapeMismatches) {
  expect_error(raw("size.safetensors", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "12345678"),
               "needs 12 bytes");
  expect_error(raw("dtype.safetensors", R"({"a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})",
                   std::string(16, 'x')),
               "unsupported dtype 'F128'");
  expect_error(raw("neg.safetensors", R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", "x"),
               "non-negative integer");
  expect_error(raw("float.safetensors", R"({"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}})", "x"),
               "non-negative integer");
  expect_error(raw("overflow.safetensors",
                   R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", "12345678"),
               "overflows");
  // Valid per the spec but not representable in LibTorch 1.13.
  expect_error(raw("u16.safetensors", R"({"a":{"dtype":"U16","shape":[1],"data_offsets":[0,2]}})", "xy"),
               "no LibTorch equivalent");
}

TEST_F(Safetensors, LoadsShardsAndAnIndexAndRejectsDuplicates) {
  st::save(path("m-1of2.safetensors"), {{"a", torch::ones({2})}, {"b", torch::zeros({3})}});
  st::save(path("m-2of2.safetensors"), {{"c", torch::full({1}, 5.0)}});
  const auto all = st::load(std::vector<std::string>{path("m-1of2.safetensors"), path("m-2of2.safetensors")});
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all.at("c").item<float>(), 5.0f);

  std::ofstream(path("m.safetensors.index.json"))
      << R"({"metadata":{},"weight_map":{"a":"m-1of2.safetensors","b":"m-1of2.safetensors","c":"m-2of2.safetensors"}})";
  EXPECT_EQ(st::load(std::vector<std::string>{path("m.safetensors.index.json")}).size(), 3u);

  st::save(path("dup.safetensors"), {{"b", torch::zeros({3})}});
  try {
    st::load(std::vector<std::string>{path("m-1of2.safetensors"), path("dup.safetensors")});
    ADD_FAILURE() << "duplicate tensor across shards accepted";
  } catch (const st::FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("'b' is in two shards"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dup.safetensors"), std::string::npos) << e.what();
  }
  expect_error(path("absent.safetensors"), "no such file");
}

}  // namespace
