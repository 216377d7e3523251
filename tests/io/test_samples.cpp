// The generated samples are what the demo and tests stand on: check they
// are deterministic and contain what they claim.
#include <gtest/gtest.h>

#include "io_test_util.h"
#include "tessera/io/ct_phantom.h"
#include "tessera/io/features.h"
#include "tessera/io/samples.h"
#include "tessera/io/video.h"

namespace tessera::io {
namespace {

TEST(Samples, CtPhantomHasOrgansWithTheirHuAndLabels) {
  CtPhantomOptions o;
  o.noise_hu = 0;
  const CtPhantom p = make_ct_phantom(o);
  EXPECT_EQ(p.ct.geometry, p.labels.geometry);
  EXPECT_NE(p.ct.geometry.direction[0][1], 0.0);  // oblique
  EXPECT_NE(p.ct.geometry.spacing[0], p.ct.geometry.spacing[2]);  // anisotropic
  const auto* hu = p.ct.data<std::int16_t>();
  const auto* lab = p.labels.data<std::uint8_t>();
  std::vector<int> seen(8, 0);
  for (std::int64_t i = 0; i < p.ct.geometry.voxel_count(); ++i) {
    ++seen[lab[i]];
    for (const auto& organ : p.organs)
      if (organ.label > 0 && organ.label == lab[i]) ASSERT_EQ(hu[i], organ.hu) << organ.name;
  }
  for (int l = 1; l <= 6; ++l) EXPECT_GT(seen[l], 0) << "label " << l;
  EXPECT_EQ(p.ct.value_range().first, -1000);  // air, without noise
  // Deterministic for a seed.
  EXPECT_EQ(make_ct_phantom().ct.bytes, make_ct_phantom().ct.bytes);
}

TEST(Samples, SlideImageHasGlassTissueAndNuclei) {
  const RgbImage a = make_sample_slide_image(512, 384, 3);
  EXPECT_EQ(a.rgb, make_sample_slide_image(512, 384, 3).rgb);
  int glass = 0, tissue = 0, nuclei = 0;
  for (int y = 0; y < a.height; ++y)
    for (int x = 0; x < a.width; ++x) {
      const auto* p = a.pixel(x, y);
      if (p[0] >= 240 && p[1] >= 240) ++glass;
      else if (p[0] > 200) ++tissue;
      else if (p[2] > p[0]) ++nuclei;
    }
  EXPECT_GT(glass, 512 * 384 / 10);
  EXPECT_GT(tissue, 512 * 384 / 10);
  EXPECT_GT(nuclei, 100);
  EXPECT_EQ(glass + tissue + nuclei, 512 * 384);
}

TEST(Samples, VideoHasOneLabelPerSecondAndAllFrames) {
  TESSERA_SKIP_WITHOUT(built_features().ffmpeg);
  test::ScratchDir dir;
  SampleVideoOptions o;
  o.width = 160;
  o.height = 120;
  o.fps = 10;
  o.seconds = 8;
  const Table labels = write_sample_video(dir.file("e.mp4"), o);
  ASSERT_EQ(labels.rows.size(), 8u);
  EXPECT_EQ(std::get<std::string>(labels.rows[0][2]), "preparation");
  EXPECT_EQ(std::get<std::string>(labels.rows[7][2]), "retraction");
  const VideoInfo in = probe_video(dir.file("e.mp4"));
  EXPECT_EQ(in.frame_count, 80);
  EXPECT_EQ(in.width, 160);
  EXPECT_NEAR(in.duration_s, 8.0, 1e-6);
}

}  // namespace
}  // namespace tessera::io
