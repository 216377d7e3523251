// Clip sampling from video: by timestamp on a variable-frame-rate file the
// test writes, tubelet patching as VideoMAE's Conv3d sees it, memory bounded
// while streaming a long video, and the real sample mp4.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "tessera/patching/video_clips.h"

namespace {

using namespace tessera;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tessera_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

// Frame i is a flat grey of level 20 + 10 i: after decoding, the level says which frame was shown.
io::RgbImage flat(int w, int h, int level) {
  io::RgbImage img(w, h);
  std::fill(img.rgb.begin(), img.rgb.end(), static_cast<uint8_t>(level));
  return img;
}

// A video of `frames` flat frames at `fps`, frame i of grey level level(i).
void write_flat_video(const std::string& path, int w, int h, int fps, int frames, const std::function<int(int)>& level) {
  io::VideoWriteOptions wo;
  wo.width = w;
  wo.height = h;
  wo.fps = fps;
  io::VideoWriter writer(path, wo);
  for (int i = 0; i < frames; ++i) writer.add_frame(flat(w, h, level(i)));
  writer.finish();
}

patching::ClipOptions clip_options(double fps, int frames_per_clip, int clip_stride, int size) {
  patching::ClipOptions o;
  o.fps = fps;
  o.frames_per_clip = frames_per_clip;
  o.clip_stride = clip_stride;
  o.size = size;
  return o;
}

double rss_mib() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return r.ru_maxrss / 1024.0;
}

TEST(VideoClips, SamplesByTimestampOnVariableFrameRate) {
  const std::string path = temp_path("vfr.mkv");
  // Frames at irregular times (ms): 0, 100, 150, 400, 1000, 1050, 1600, 2500; the video ends at 3000 ms.
  const std::vector<int64_t> pts_ms = {0, 100, 150, 400, 1000, 1050, 1600, 2500, 2999};
  {
    io::VideoWriteOptions wo;
    wo.width = 64;
    wo.height = 48;
    wo.fps = 10;
    wo.time_base_den = 1000;
    io::VideoWriter w(path, wo);
    for (size_t i = 0; i < pts_ms.size(); ++i) w.add_frame(flat(64, 48, 20 + 10 * int(i)), pts_ms[i]);
    w.finish();
  }
  patching::ClipOptions o = clip_options(4, 4, 4, 32);  // samples at 0, 0.25, 0.5, ... seconds
  o.mean = {0, 0, 0};
  o.std = {1, 1, 1};
  patching::ClipSampler sampler(path, o);
  patching::Clip clip;
  std::vector<double> times;
  std::vector<int> shown;
  while (sampler.next(clip)) {
    for (int i = 0; i < clip.valid_frames; ++i) {
      times.push_back(clip.times[i]);
      const float level = clip.frames[i].mean().item<float>() * 255.f;
      shown.push_back(int(std::lround((level - 20.f) / 10.f)));
    }
  }
  std::filesystem::remove(path);
  ASSERT_GE(times.size(), 11u);
  for (size_t k = 0; k < times.size(); ++k) {
    EXPECT_NEAR(times[k], k * 0.25, 1e-6);
    // the frame on screen at k/4 s: the last one whose pts <= that time
    int expect = 0;
    for (size_t i = 0; i < pts_ms.size(); ++i)
      if (pts_ms[i] <= int64_t(k * 250)) expect = int(i);
    EXPECT_EQ(shown[k], expect) << "at t = " << times[k];
  }
}

TEST(VideoClips, DisplayRotationTurnsFramesCounterClockwise) {
  EXPECT_EQ(patching::display_quarter_turns(0), 0);
  EXPECT_EQ(patching::display_quarter_turns(90), 1);
  EXPECT_EQ(patching::display_quarter_turns(-90), 3);  // phones in portrait: 90 degrees clockwise
  EXPECT_EQ(patching::display_quarter_turns(180), 2);
  EXPECT_EQ(patching::display_quarter_turns(-180), 2);
  EXPECT_EQ(patching::display_quarter_turns(270.4), 3);
  // A 3x2 picture (columns 0..2, rows 0..1), each pixel's red = 10 * (3 * row + column).
  io::RgbImage img(3, 2);
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x) img.pixel(x, y)[0] = uint8_t(10 * (3 * y + x));
  auto red = [&](int turns) {
    return (patching::frame_to_tensor(img, 2, {0, 0, 0}, {1, 1, 1}, turns)[0] * 255).round().to(torch::kInt);
  };
  // Unturned: the centred 2x2 of [[0 10 20] [30 40 50]] is columns 0-1 (offset (3-2)/2 = 0).
  EXPECT_TRUE(torch::equal(red(0), torch::tensor({{0, 10}, {30, 40}}, torch::kInt)));
  // A quarter turn counter-clockwise: the right column comes on top, [[20 50] [10 40] [0 30]], rows 0-1 kept.
  EXPECT_TRUE(torch::equal(red(1), torch::tensor({{20, 50}, {10, 40}}, torch::kInt)));
  // Three quarter turns (90 clockwise): [[30 0] [40 10] [50 20]].
  EXPECT_TRUE(torch::equal(red(3), torch::tensor({{30, 0}, {40, 10}}, torch::kInt)));
}

// A frame becomes the centred square, channels first, as (v / 255 - mean) / std in float: the same
// numbers as those tensor operations give, turned or not, on a frame wider or taller than the crop.
TEST(VideoClips, FrameToTensorNormalisesTheCentredSquare) {
  const std::array<float, 3> mean = {0.485f, 0.456f, 0.406f}, std = {0.229f, 0.224f, 0.225f};
  torch::manual_seed(3);
  for (auto [w, h] : {std::pair{61, 40}, std::pair{40, 57}})
    for (int turns : {0, 1, 2, 3}) {
      io::RgbImage img(w, h);
      const at::Tensor bytes = torch::randint(0, 256, {h, w, 3}, torch::kByte);
      std::memcpy(img.rgb.data(), bytes.data_ptr<uint8_t>(), img.rgb.size());
      const at::Tensor got = patching::frame_to_tensor(img, 32, mean, std, turns);
      at::Tensor hwc = turns ? torch::rot90(bytes, turns, {0, 1}) : bytes;
      hwc = hwc.narrow(0, (hwc.size(0) - 32) / 2, 32).narrow(1, (hwc.size(1) - 32) / 2, 32);
      const at::Tensor want = hwc.permute({2, 0, 1}).to(torch::kFloat).div(255.f)
                                  .sub(torch::tensor({mean[0], mean[1], mean[2]}).view({3, 1, 1}))
                                  .div(torch::tensor({std[0], std[1], std[2]}).view({3, 1, 1}));
      EXPECT_TRUE(torch::equal(got, want)) << w << "x" << h << ", " << turns << " turns; max diff "
                                           << (got - want).abs().max().item<float>();
    }
}

TEST(VideoClips, AFileCutShortSaysWhereDecodingStopped) {
  const std::string path = temp_path("whole.mkv"), cut = temp_path("cut.mkv");
  {
    io::VideoWriteOptions wo;
    wo.width = 64;
    wo.height = 48;
    wo.fps = 10;
    io::VideoWriter w(path, wo);
    for (int i = 0; i < 40; ++i) w.add_frame(flat(64, 48, 20 + 5 * (i % 40)));
    w.finish();
  }
  {
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  auto run = [](const std::string& p) {
    patching::ClipSampler sampler(p, clip_options(2, 2, 2, 32));
    patching::Clip clip;
    while (sampler.next(clip)) {
    }
    return std::pair{sampler.frames_sampled(), sampler.stopped_at()};
  };
  auto run_prefetched = [](const std::string& p) {
    patching::ClipPrefetcher clips(p, clip_options(2, 2, 2, 32), 1);
    patching::Clip clip;
    while (clips.next(clip)) {
    }
    return std::pair{clips.frames_sampled(), clips.stopped_at()};
  };
  const auto whole = run(path), part = run(cut);
  // The decoding thread reports the same place.
  EXPECT_EQ(run_prefetched(path).first, whole.first);
  const auto part_prefetched = run_prefetched(cut);
  EXPECT_EQ(part_prefetched.first, part.first);
  EXPECT_EQ(part_prefetched.second, part.second);
  std::filesystem::remove(path);
  std::filesystem::remove(cut);
  EXPECT_EQ(whole.first, 8);
  EXPECT_TRUE(std::isnan(whole.second)) << whole.second;
  ASSERT_FALSE(std::isnan(part.second)) << "a file cut in half must say where it stopped";
  EXPECT_GT(part.first, 0);
  EXPECT_LT(part.first, 8);
  EXPECT_NEAR(part.second, (part.first - 1) * 0.5, 1e-9);  // the last sample's time
}

TEST(VideoClips, TubeletPatchesMatchConv3dWindows) {
  auto clip = torch::randn({4, 3, 32, 48});
  auto tokens = patching::tubelet_patches(clip, 2, 16);
  ASSERT_EQ(tokens.sizes(), (std::vector<int64_t>{2 * 2 * 3, 3 * 2 * 16 * 16}));
  // token (t=1, row=1, col=2) holds clip[2:4, :, 16:32, 32:48] in (c, t, y, x) order
  auto expect = clip.narrow(0, 2, 2).narrow(2, 16, 16).narrow(3, 32, 16).permute({1, 0, 2, 3}).reshape({-1});
  EXPECT_TRUE(torch::equal(tokens[1 * 6 + 1 * 3 + 2], expect));
  // and a Conv3d with the flattened tokens as weights gives the same dot products
  auto w = torch::randn({5, 3, 2, 16, 16});
  auto conv = torch::conv3d(clip.permute({1, 0, 2, 3}).unsqueeze(0), w, {}, {2, 16, 16});  // [1, 5, 2, 2, 3]
  auto mm = tokens.matmul(w.reshape({5, -1}).t());                                        // [12, 5]
  EXPECT_TRUE(torch::allclose(conv.flatten(2).squeeze(0).t(), mm, 1e-4, 1e-4));
  EXPECT_THROW(patching::tubelet_patches(torch::randn({3, 3, 32, 32})), std::invalid_argument);
}

TEST(VideoClips, StreamingMemoryDoesNotGrowWithLength) {
  const std::string path = temp_path("long.mp4");
  write_flat_video(path, 96, 64, 5, 5 * 60 * 12, [](int i) { return (i * 7) % 200 + 20; });  // 12 minutes
  patching::ClipOptions o = clip_options(1, 16, 8, 64);
  patching::ClipSampler sampler(path, o);
  patching::Clip clip;
  int64_t clips = 0;
  double after_first = 0;
  while (sampler.next(clip)) {
    if (++clips == 5) after_first = rss_mib();
  }
  std::filesystem::remove(path);
  EXPECT_EQ(sampler.frames_sampled(), 720);
  EXPECT_EQ(clips, (720 - 16) / 8 + 2);  // full clips, then the partial tail
  EXPECT_LT(rss_mib() - after_first, 20.0) << "memory grew while streaming";
}

TEST(VideoClips, RealSampleMp4) {
  const std::string path = std::string(TESSERA_SHARED_DATA) + "/realshort.mp4";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  patching::ClipOptions o = clip_options(10, 4, 4, 112);
  patching::ClipSampler sampler(path, o);
  patching::Clip clip;
  int64_t frames = 0;
  while (sampler.next(clip)) {
    EXPECT_EQ(clip.frames.sizes(), (std::vector<int64_t>{4, 3, 112, 112}));
    frames += clip.valid_frames;
  }
  // 36 frames at 45000/1499 fps last 1.199 s: samples at 0, 0.1, ..., 1.1 s
  EXPECT_EQ(frames, 12);
}

// On its own thread the sampler gives the same clips, in order, whatever the queue's capacity;
// a consumer that stops early leaves nothing running.
TEST(VideoClips, PrefetcherGivesTheSamplersClips) {
  const std::string path = temp_path("prefetch.mkv");
  write_flat_video(path, 64, 48, 10, 30, [](int i) { return 20 + 7 * i; });
  struct Remove {
    std::string p;
    ~Remove() { std::filesystem::remove(p); }
  } remove{path};
  const patching::ClipOptions o = clip_options(10, 4, 2, 32);
  std::vector<patching::Clip> direct;
  {
    patching::ClipSampler sampler(path, o);
    patching::Clip clip;
    while (sampler.next(clip)) direct.push_back(clip);
  }
  ASSERT_GT(direct.size(), 2u);
  for (int capacity : {1, 3, 100}) {
    patching::ClipPrefetcher clips(path, o, capacity);
    patching::Clip clip;
    size_t i = 0;
    while (clips.next(clip)) {
      ASSERT_LT(i, direct.size());
      EXPECT_EQ(clip.index, direct[i].index);
      EXPECT_EQ(clip.times, direct[i].times);
      EXPECT_EQ(clip.valid_frames, direct[i].valid_frames);
      EXPECT_TRUE(at::equal(clip.frames, direct[i].frames)) << "clip " << i << ", capacity " << capacity;
      ++i;
    }
    EXPECT_EQ(i, direct.size());
    EXPECT_FALSE(clips.next(clip));
  }
  patching::ClipPrefetcher early(path, o, 1);
  patching::Clip first;
  ASSERT_TRUE(early.next(first));  // destroyed here with its thread blocked on a full queue
}

}  // namespace
