// Datasets: generated phantoms vary in geometry but keep their anatomy in
// RAS; folder (imagesTr/labelsTr) and CSV datasets of the same files load to
// the same tensors; bad datasets fail naming the file.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <set>

#include "tessera/io/ct_phantom.h"
#include "tessera/io/orientation.h"
#include "tessera/io/volume_io.h"
#include "tessera/train/seg_dataset.h"
#include "train_test_util.h"

namespace tessera::train {
namespace {

namespace fs = std::filesystem;
using testing::temp_dir;
using testing::write_file;

double centroid_x(const at::Tensor& label, int k) {
  const auto idx = (label == k).nonzero();  // [n, 3]
  return idx.select(1, 0).to(torch::kDouble).mean().item<double>();
}

TEST(SegDataset, RandomPhantomsVaryButKeepAnatomyInRas) {
  std::set<std::string> codes;
  std::set<int64_t> sizes;
  PreprocessConfig pre;
  pre.spacing = {3, 3, 4};
  for (uint64_t seed = 0; seed < 6; ++seed) {
    const io::CtPhantom p = io::make_random_ct_phantom(seed);
    EXPECT_EQ(p.ct.geometry, p.labels.geometry);
    codes.insert(io::orientation_code(p.ct.geometry.direction));
    sizes.insert(p.ct.geometry.size[0]);
    const SegCase c = preprocess_case("p", p.ct, p.labels, pre, 7);
    EXPECT_EQ(c.image.size(0), 1);
    EXPECT_EQ(c.image.sizes().slice(1), c.label.sizes());
    EXPECT_GE(c.image.min().item<float>(), 0.f);
    EXPECT_LE(c.image.max().item<float>(), 1.f);
    for (int k = 1; k <= 6; ++k) EXPECT_GT((c.label == k).sum().item<int64_t>(), 0) << "seed " << seed << " label " << k;
    // RAS: index 0 grows towards the patient's right, where the liver (1) and right kidney (4) lie.
    EXPECT_GT(centroid_x(c.label, 1), centroid_x(c.label, 2)) << "seed " << seed;
    EXPECT_GT(centroid_x(c.label, 4), centroid_x(c.label, 3)) << "seed " << seed;
  }
  EXPECT_GE(codes.size(), 3u) << "storage orientations should vary";
  EXPECT_GE(sizes.size(), 4u);
  // Same seed, same phantom.
  EXPECT_EQ(io::make_random_ct_phantom(4).ct.bytes, io::make_random_ct_phantom(4).ct.bytes);
}

TEST(SegDataset, FolderAndCsvLoadTheSameCases) {
  if (!TESSERA_HAS_ITK) GTEST_SKIP() << "built without ITK: no NIfTI files";
  const auto dir = temp_dir("folder");
  fs::create_directories(dir + "/imagesTr");
  fs::create_directories(dir + "/labelsTr");
  std::string csv = "image,label\n";
  PreprocessConfig pre;
  pre.spacing = {4, 4, 5};
  std::vector<SegCase> direct;
  for (uint64_t seed : {21, 22}) {
    const io::CtPhantom p = io::make_random_ct_phantom(seed);
    const std::string name = "case" + std::to_string(seed);
    io::write_volume(dir + "/imagesTr/" + name + "_0000.nii.gz", p.ct);
    io::write_volume(dir + "/labelsTr/" + name + ".nii.gz", p.labels);
    csv += "imagesTr/" + name + "_0000.nii.gz,labelsTr/" + name + ".nii.gz\n";
    direct.push_back(preprocess_case(name, p.ct, p.labels, pre, 7));
  }
  write_file(dir + "/pairs.csv", csv);
  const auto from_folder = load_split({"folder", dir, 0, 0}, pre, 7);
  const auto from_csv = load_split({"csv", dir + "/pairs.csv", 0, 0}, pre, 7);
  ASSERT_EQ(from_folder.size(), 2u);
  ASSERT_EQ(from_csv.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(from_folder[i].name, "case" + std::to_string(21 + i));
    EXPECT_TRUE(torch::equal(from_folder[i].label, direct[i].label));
    // NIfTI stores the spacing as float32: Spacing's sample points move by < 2e-5 voxel, the windowed
    // intensities (at most 1 per voxel) by less than that.
    ASSERT_EQ(from_folder[i].image.sizes(), direct[i].image.sizes());
    EXPECT_LT((from_folder[i].image - direct[i].image).abs().max().item<double>(), 2e-5) << "case " << i;
    EXPECT_TRUE(torch::equal(from_csv[i].label, from_folder[i].label));
    EXPECT_TRUE(torch::equal(from_csv[i].image, from_folder[i].image));
  }
}

TEST(SegDataset, BadDatasetsNameTheFile) {
  const auto dir = temp_dir("bad");
  PreprocessConfig pre;
  auto expect_throw = [&](const DataSplit& s, const std::string& needle) {
    try {
      load_split(s, pre, 3);
      FAIL() << "accepted " << s.path;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_throw({"folder", dir, 0, 0}, "imagesTr");
  write_file(dir + "/no_header.csv", "a,b\nx,y\n");
  expect_throw({"csv", dir + "/no_header.csv", 0, 0}, "no_header.csv: the header must name columns `image`, `label`");
  // Labels beyond the class count.
  const io::CtPhantom p = io::make_ct_phantom({{16, 16, 8}, {4, 4, 5}, 0, 0, 1});
  try {
    preprocess_case("tiny", p.ct, p.labels, pre, 3);
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("tiny: label values must be integers in [0, 2]"), std::string::npos) << e.what();
  }
  if (TESSERA_HAS_ITK) {
    fs::create_directories(dir + "/imagesTr");
    fs::create_directories(dir + "/labelsTr");
    io::write_volume(dir + "/imagesTr/a.nii.gz", p.ct);
    expect_throw({"folder", dir, 0, 0}, "a.nii.gz: no label file");
  }
}

}  // namespace
}  // namespace tessera::train
