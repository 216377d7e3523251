// The volume path on the real sample CT: read, reorient to RAS, resample,
// window the intensities, sliding windows with an identity model, and the
// full inverse back onto the input's own voxels and geometry.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "tessera/io/orientation.h"
#include "tessera/io/volume_io.h"
#include "tessera/patching/intensity.h"
#include "tessera/patching/spacing.h"
#include "tessera/patching/sliding_window.h"
#include "tessera/patching/volume_tensor.h"

namespace {

using namespace tessera;

TEST(VolumePipeline, SampleCtSlidingWindowIdentityAndExactInverse) {
  const std::string path = std::string(TESSERA_SHARED_DATA) + "/example_ct_sm.nii.gz";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  const io::Volume ct = io::read_volume(path);
  io::Reorientation ro;
  const io::Volume ras = io::reorient_to_ras(ct, &ro);
  at::Tensor x = patching::volume_to_tensor(ras);  // [1, X, Y, Z] in HU
  ASSERT_EQ(x.size(1), ras.geometry.size[0]);
  // The sample is 3 mm isotropic; 1.5 mm (an integer factor, so the way back is exact), then
  // MONAI's BTCV window [-175, 250] -> [0, 1].
  const std::vector<double> sp(ras.geometry.spacing.begin(), ras.geometry.spacing.end());
  ASSERT_NEAR(sp[0], 3.0, 1e-6);
  const at::Tensor spaced = patching::spacing_resample(x, sp, {1.5, 1.5, 1.5}, patching::Interp::linear);
  EXPECT_EQ(spaced.size(1), (x.size(1) - 1) * 2 + 1);
  at::Tensor img = patching::scale_intensity_range(spaced, -175, 250, 0, 1, true).unsqueeze(0);

  patching::SlidingWindowOptions o;
  o.roi_size = {48, 48, 32};
  o.overlap = {0.5};
  o.mode = patching::BlendMode::gaussian;
  o.sw_batch_size = 2;
  int64_t windows = 0;
  o.progress = [&](int64_t done, int64_t) { windows = done; };
  at::Tensor out = patching::sliding_window_inference(img, [](const at::Tensor& t) { return t.clone(); }, o);
  EXPECT_GT(windows, 1);
  EXPECT_LT((out - img).abs().max().item<double>(), 1e-5);

  // Back to the input grid: invert the Spacing, write on the RAS geometry, undo the reorientation.
  at::Tensor back = patching::invert_spacing(out.squeeze(0), sp, {1.5, 1.5, 1.5}, {x.size(1), x.size(2), x.size(3)},
                                             patching::Interp::linear);
  io::Volume pred = patching::tensor_to_volume(back, ras.geometry, io::PixelType::kFloat32);
  io::Volume on_input = io::undo_reorientation(pred, ro);
  EXPECT_TRUE(on_input.geometry == ct.geometry);
  // Every voxel holds the windowed value of the same input voxel.
  at::Tensor expect = patching::scale_intensity_range(patching::volume_to_tensor(ct), -175, 250, 0, 1, true);
  at::Tensor got = patching::volume_to_tensor(on_input);
  EXPECT_LT((got - expect).abs().max().item<double>(), 1e-4);
}

}  // namespace
