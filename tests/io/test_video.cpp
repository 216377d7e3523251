// Video: the real H.264+AAC clip, and clips we encode ourselves whose frames
// carry their own index as a grey level, so every decoded, resampled or
// seeked frame can be identified.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <variant>
#include <vector>

#include "io_test_util.h"
#include "tessera/io/features.h"
#include "tessera/io/samples.h"
#include "tessera/io/video.h"

namespace tessera::io {
namespace {

int grey_for(int i) { return 12 + 8 * i; }  // frame index -> grey level (i < 30)

// Flat grey centre (the index) inside a noisy border, so packets are large
// enough that damage lands inside frame data, not only in the index.
RgbImage grey_frame(int w, int h, int i) {
  RgbImage f(w, h);
  std::fill(f.rgb.begin(), f.rgb.end(), static_cast<std::uint8_t>(grey_for(i % 30)));
  unsigned s = 12345u + static_cast<unsigned>(i);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      if (x < w / 8 || x >= w - w / 8 || y < h / 8 || y >= h - h / 8) {
        s = s * 1103515245u + 12345u;
        auto* p = f.pixel(x, y);
        p[0] = p[1] = p[2] = static_cast<std::uint8_t>(s >> 24);
      }
  return f;
}

// Which frame (mod 30) a decoded picture is, from the mean grey of its centre.
int frame_of(const RgbImage& f) {
  double sum = 0;
  int n = 0;
  for (int y = f.height / 4; y < 3 * f.height / 4; ++y)
    for (int x = f.width / 4; x < 3 * f.width / 4; ++x, ++n) sum += f.pixel(x, y)[1];
  return static_cast<int>(std::lround((sum / n - 12) / 8));
}

// 25 fps, `count` frames, keyframe every second.
void write_counting_video(const std::string& path, int count, const std::vector<std::int64_t>& pts_ms = {}) {
  VideoWriteOptions o;
  o.width = 96;
  o.height = 64;
  o.fps = 25;
  o.time_base_den = pts_ms.empty() ? 0 : 1000;
  o.bit_rate = 4'000'000;
  VideoWriter w(path, o);
  for (int i = 0; i < count; ++i) w.add_frame(grey_frame(96, 64, i), pts_ms.empty() ? -1 : pts_ms[i]);
  w.finish();
}

TEST(Video, RealClipMetadataAndAllFrames) {
  TESSERA_SKIP_WITHOUT(built_features().ffmpeg);
  const std::string path = test::shared_data("realshort.mp4");
  if (path.empty()) GTEST_SKIP() << "../shared/data/realshort.mp4 absent";
  const VideoInfo in = probe_video(path);
  EXPECT_EQ(in.codec, "h264");
  EXPECT_EQ(in.width, 320);
  EXPECT_EQ(in.height, 240);
  EXPECT_EQ(in.frame_count, 36);
  EXPECT_EQ(in.real_frame_rate.num, 45000);
  EXPECT_EQ(in.real_frame_rate.den, 1499);
  EXPECT_TRUE(in.has_audio());
  EXPECT_NEAR(in.duration_s, 1.2, 0.05);
  VideoReader r(path);
  VideoFrame f;
  int n = 0;
  double last = -1;
  while (r.next(f)) {
    EXPECT_GT(f.time_s, last);
    EXPECT_EQ(f.index, n);
    EXPECT_EQ(f.image.width, 320);
    last = f.time_s;
    ++n;
  }
  EXPECT_EQ(n, 36);  // the audio stream is skipped, not decoded as frames
  EXPECT_EQ(r.corrupt_packets(), 0);
  EXPECT_NEAR(last, 35 * 1499.0 / 45000, 2e-3);
}

TEST(Video, WrittenClipDecodesEveryFrameAtItsTimestamp) {
  TESSERA_SKIP_WITHOUT(built_features().ffmpeg);
  test::ScratchDir dir;
  write_counting_video(dir.file("c.mp4"), 50);
  const VideoInfo in = probe_video(dir.file("c.mp4"));
  EXPECT_EQ(in.frame_count, 50);
  EXPECT_NEAR(in.avg_frame_rate.value(), 25, 1e-9);
  EXPECT_FALSE(in.has_audio());
  VideoReader r(dir.file("c.mp4"));
  VideoFrame f;
  int n = 0;
  while (r.next(f)) {
    EXPECT_NEAR(f.time_s, n / 25.0, 1e-6);
    EXPECT_EQ(frame_of(f.image), n % 30) << n;
    ++n;
  }
  EXPECT_EQ(n, 50);
}

TEST(Video, RotationFromTheDisplayMatrixIsReported) {
  TESSERA_SKIP_WITHOUT(built_features().ffmpeg);
  test::ScratchDir dir;
  for (double deg : {90.0, -90.0, 180.0}) {
    VideoWriteOptions o;
    o.width = 32;
    o.height = 16;
    o.fps = 10;
    o.rotation_degrees = deg;
    const std::string path = dir.file("rot" + std::to_string(static_cast<int>(deg)) + ".mp4");
    VideoWriter w(path, o);
    for (int i = 0; i < 3; ++i) w.add_frame(grey_frame(32, 16, i));
    w.finish();
    const double got = probe_video(path).rotation_degrees;
    // 180 and -180 are the same rotation.
    EXPECT_NEAR(std::remainder(got - deg, 360.0), 0.0, 1e-6) << path;
  }
}

TEST(Video, ResamplingPicksTheFrameOnScreenAtEachTime) {
  TESSERA_SKIP_WITHOUT(built_features().ffmpeg);
  test::ScratchDir dir;
  write_counting_video(dir.file("c.mp4"), 50);
  {
    VideoReadOptions o;
    o.target_fps = 5;
    VideoReader r(dir.file("c.mp4"), o);
    VideoFrame f;
    int k = 0;
    while (r.next(f)) {
      EXPECT_NEAR(f.time_s, k * 0.2, 1e-9);
      EXPECT_EQ(frame_of(f.image), (5 * k) % 30) << k;
      ++k;
    }
    EXPECT_EQ(k, 10);
  }
  {
    VideoReadOptions o;
    o.target_fps = 50;  // upsampling repeats frames
    o.width = 48;
    o.height = 32;
    VideoReader r(dir.file("c.mp4"), o);
    VideoFrame f;
    int k = 0;
    while (r.next(f)) {
      EXPECT_EQ(f.image.width, 48);
      EXPECT_EQ(frame_of(f.image), (k / 2) % 30) << k;
      ++k;
    }
    EXPECT_EQ(k, 100);
  }
}

TEST(Video, VariableFrameRateIsResampledByTimestampNotIndex) {
  TESSERA_SKIP_WITHOUT(built_features().ffmpeg);
  test::ScratchDir dir;
  // Irregular gaps: 40, 40, 120, 20, 20, 200 ... ms.
  std::vector<std::int64_t> pts;
  const int gaps[] = {40, 40, 120, 20, 20, 200, 40, 60, 40, 40};
  std::int64_t t = 0;
  for (int i = 0; i < 20; ++i) {
    pts.push_back(t);
    t += gaps[i % 10];
  }
  write_counting_video(dir.file("vfr.mkv"), 20, pts);
  VideoReadOptions o;
  o.target_fps = 10;
  VideoReader r(dir.file("vfr.mkv"), o);
  VideoFrame f;
  int k = 0;
  while (r.next(f)) {
    const double tk = k * 0.1;
    int expect = 0;  // last frame whose pts <= tk
    for (int i = 0; i < 20; ++i)
      if (pts[i] <= std::lround(tk * 1000)) expect = i;
    EXPECT_EQ(frame_of(f.image), expect) << "t=" << tk;
    EXPECT_NEAR(f.source_pts_s, pts[expect] / 1000.0, 1e-6);
    ++k;
  }
  // The last frame (pts t - gap) shows for one nominal frame (1/25 s).
  EXPECT_EQ(k, static_cast<int>(std::ceil((pts.back() / 1000.0 + 0.04) / 0.1 - 1e-9)));
}

TEST(Video, HardwareDecodeFallsBackToSoftwareWithTheSameFrames) {
  TESSERA_SKIP_WITHOUT(built_features().ffmpeg);
  test::ScratchDir dir;
  write_counting_video(dir.file("c.mp4"), 20);
  for (const char* device : {"cuda", "no-such-device"}) {
    VideoReadOptions o;
    o.hw_device = device;
    VideoReader hw(dir.file("c.mp4"), o);
    VideoReader sw(dir.file("c.mp4"));
    VideoFrame a, b;
    int n = 0;
    while (hw.next(a)) {
      ASSERT_TRUE(sw.next(b));
      if (!hw.hardware_decoding()) EXPECT_EQ(a.image.rgb, b.image.rgb) << device << " frame " << n;
      EXPECT_EQ(frame_of(a.image), n % 30);
      ++n;
    }
    EXPECT_EQ(n, 20) << device;
    if (std::string(device) != "cuda") EXPECT_FALSE(hw.hardware_decoding());
  }
}

TEST(Video, SeekLandsOnTheFrameShownAtThatTime) {
  TESSERA_SKIP_WITHOUT(built_features().ffmpeg);
  test::ScratchDir dir;
  write_counting_video(dir.file("c.mp4"), 75);
  VideoReader r(dir.file("c.mp4"));
  VideoFrame f;
  r.seek(1.3);  // between keyframes (every 25 frames): decode forward to frame 33
  ASSERT_TRUE(r.next(f));
  EXPECT_NEAR(f.time_s, 33 / 25.0, 1e-6);
  EXPECT_EQ(frame_of(f.image), 33 % 30);
  r.seek(0.0);  // back to the start
  ASSERT_TRUE(r.next(f));
  EXPECT_EQ(frame_of(f.image), 0);
  EXPECT_EQ(f.index, 0);

  VideoReadOptions o;
  o.target_fps = 5;
  VideoReader rs(dir.file("c.mp4"), o);
  rs.seek(2.0);
  int k = 0;
  while (rs.next(f)) {
    EXPECT_NEAR(f.time_s, 2.0 + 0.2 * k, 1e-9);
    EXPECT_EQ(frame_of(f.image), (50 + 5 * k) % 30);
    ++k;
  }
  EXPECT_EQ(k, 5);
}

TEST(Video, CorruptPacketsAreSkippedAndCounted) {
  TESSERA_SKIP_WITHOUT(built_features().ffmpeg);
  test::ScratchDir dir;
  write_counting_video(dir.file("c.mp4"), 50);
  std::string bytes = test::read_bytes(dir.file("c.mp4"));
  // Overwrite a stretch in the middle of the media data with garbage.
  for (std::size_t i = bytes.size() / 3; i < bytes.size() / 3 + 64; ++i)
    bytes[i] = static_cast<char>((i * 131) & 0xff);
  test::write_bytes(dir.file("bad.mp4"), bytes);
  VideoReader r(dir.file("bad.mp4"));
  VideoFrame f;
  int n = 0, damaged = 0;
  while (r.next(f)) {
    if (frame_of(f.image) != n % 30) ++damaged;
    ++n;
  }
  EXPECT_GT(n, 0);
  // The damaged packet is noticed, counted and its frame skipped; the rest
  // of the video still decodes (later frames may show the damage: damaged).
  EXPECT_GT(r.corrupt_packets(), 0);
  EXPECT_EQ(n + r.corrupt_packets(), 50) << "damaged frames: " << damaged;
}

// Every frame a reader gives, in order.
template <class Reader>
std::vector<VideoFrame> all_frames(Reader& r) {
  std::vector<VideoFrame> out;
  VideoFrame f;
  while (r.next(f)) out.push_back(f);
  return out;
}

void expect_same_frames(const std::vector<VideoFrame>& got, const std::vector<VideoFrame>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].time_s, want[i].time_s) << what << ", frame " << i;  // the same grid, bit for bit
    EXPECT_EQ(got[i].source_pts_s, want[i].source_pts_s) << what << ", frame " << i;
    EXPECT_EQ(got[i].index, static_cast<std::int64_t>(i)) << what;
    EXPECT_EQ(got[i].image.rgb, want[i].image.rgb) << what << ", frame " << i;
  }
}

// Keyframe-aligned stretches decoded at once give one reader's frames: constant and variable frame
// rates, sampling rates that do and do not divide the native one, stretches of one keyframe or several.
TEST(Video, ParallelReadersGiveOneReadersFrames) {
  TESSERA_SKIP_WITHOUT(built_features().ffmpeg);
  test::ScratchDir dir;
  write_counting_video(dir.file("c.mp4"), 300);  // 12 s, a keyframe every second
  std::vector<std::int64_t> pts;
  const int gaps[] = {40, 40, 120, 20, 20, 200, 40, 60, 40, 40};
  std::int64_t t = 0;
  for (int i = 0; i < 300; ++i, t += gaps[i % 10]) pts.push_back(t);
  write_counting_video(dir.file("vfr.mkv"), 300, pts);  // a keyframe every 25 frames, at irregular times
  for (const std::string name : {"c.mp4", "vfr.mkv"})
    for (double fps : {25.0, 7.0, 3.3}) {
      VideoReadOptions o;
      o.target_fps = fps;
      VideoReader one(dir.file(name), o);
      const std::vector<VideoFrame> want = all_frames(one);
      ASSERT_GT(want.size(), 30u);
      for (int readers : {2, 3})
        for (double min_segment : {0.5, 2.5}) {
          ParallelVideoReader r(dir.file(name), o, readers, min_segment);
          EXPECT_EQ(r.readers(), readers);
          expect_same_frames(all_frames(r), want,
                             name + " at " + std::to_string(fps) + " fps, " + std::to_string(readers) + " readers, stretches >= " +
                                 std::to_string(min_segment) + " s");
        }
    }
  // One reader: a plain VideoReader behind the same interface.
  VideoReadOptions o;
  o.target_fps = 5;
  VideoReader one(dir.file("c.mp4"), o);
  ParallelVideoReader r(dir.file("c.mp4"), o, 1);
  EXPECT_EQ(r.readers(), 1);
  expect_same_frames(all_frames(r), all_frames(one), "one reader");
  EXPECT_THROW(ParallelVideoReader(dir.file("c.mp4"), VideoReadOptions{}, 2), std::invalid_argument);
}

// A crop of the scaled picture comes from scaling only the source under it: the same picture as scaling the
// whole and cropping after, up to the sub-pixel shift of the crop's edge to whole chroma samples. Sizes odd and
// even, a crop as large as the picture, and none.
TEST(Video, CroppedOutputIsTheCentreOfTheScaledPicture) {
  TESSERA_SKIP_WITHOUT(built_features().ffmpeg);
  test::ScratchDir dir;
  const std::string path = dir.file("ramp.mp4");
  {
    VideoWriteOptions wo;
    wo.width = 192;
    wo.height = 112;
    wo.fps = 25;
    wo.bit_rate = 8'000'000;
    VideoWriter w(path, wo);
    RgbImage f(192, 112);
    for (int y = 0; y < 112; ++y)
      for (int x = 0; x < 192; ++x) {
        auto* p = f.pixel(x, y);
        p[0] = static_cast<std::uint8_t>(x * 255 / 191);
        p[1] = static_cast<std::uint8_t>(y * 255 / 111);
        p[2] = static_cast<std::uint8_t>((x + y) * 255 / 302);
      }
    for (int i = 0; i < 5; ++i) w.add_frame(f);
    w.finish();
  }
  struct Case {
    int w, h, cw, ch;
  };
  for (const Case& c : {Case{96, 56, 56, 56}, Case{81, 47, 47, 47}, Case{120, 70, 33, 20}, Case{96, 56, 96, 56}}) {
    const std::string what = std::to_string(c.w) + "x" + std::to_string(c.h) + " cropped to " + std::to_string(c.cw) +
                             "x" + std::to_string(c.ch);
    VideoReadOptions o;
    o.width = c.w;
    o.height = c.h;
    VideoFrame whole, crop;
    ASSERT_TRUE(VideoReader(path, o).next(whole)) << what;
    o.crop_width = c.cw;
    o.crop_height = c.ch;
    ASSERT_TRUE(VideoReader(path, o).next(crop)) << what;
    ASSERT_EQ(crop.image.width, c.cw) << what;
    ASSERT_EQ(crop.image.height, c.ch) << what;
    const int x0 = (c.w - c.cw) / 2, y0 = (c.h - c.ch) / 2;
    double sum = 0;
    int worst = 0;
    for (int y = 0; y < c.ch; ++y)
      for (int x = 0; x < c.cw; ++x)
        for (int k = 0; k < 3; ++k) {
          const int d = std::abs(int(crop.image.pixel(x, y)[k]) - int(whole.image.pixel(x0 + x, y0 + y)[k]));
          sum += d;
          worst = std::max(worst, d);
        }
    EXPECT_LE(sum / (3.0 * c.cw * c.ch), 2.0) << what;
    EXPECT_LE(worst, 8) << what;
    if (c.cw == c.w && c.ch == c.h) EXPECT_EQ(crop.image.rgb, whole.image.rgb) << what;
  }
}

// A slow pan (encoders choose B-frames for it) with a changing tint.
RgbImage panning_frame(int w, int h, int i) {
  RgbImage f(w, h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      auto* p = f.pixel(x, y);
      p[0] = static_cast<std::uint8_t>((x + i) * 2);
      p[1] = static_cast<std::uint8_t>(y * 3 + i);
      p[2] = static_cast<std::uint8_t>(i * 5);
    }
  return f;
}

// Resampling decodes only frames a sample can land on: unsampled B-frames (no frame refers to them) are dropped
// by the decoder, and every sample is still the frame on screen at its time, found here among all the frames.
TEST(Video, UnsampledBFramesAreNotDecodedAndEverySampleIsTheFrameOnScreen) {
  TESSERA_SKIP_WITHOUT(built_features().ffmpeg);
  test::ScratchDir dir;
  std::vector<std::int64_t> vfr;
  const int gaps[] = {40, 40, 120, 20, 20, 200, 40, 60, 40, 40};
  for (std::int64_t i = 0, t = 0; i < 250; t += gaps[i % 10], ++i) vfr.push_back(t);
  struct Case {
    std::string name, codec;
    std::vector<std::int64_t> pts_ms;
  };
  for (const Case& c : {Case{"mpeg4_b.mp4", "mpeg4", {}}, Case{"h264_b.mp4", "libx264", {}}, Case{"vfr_b.mkv", "libx264", vfr}}) {
    const std::string path = dir.file(c.name);
    VideoWriteOptions wo;
    wo.width = 96;
    wo.height = 64;
    wo.fps = 25;
    wo.time_base_den = c.pts_ms.empty() ? 0 : 1000;
    wo.bit_rate = 4'000'000;
    wo.codec = c.codec;
    wo.b_frames = 3;
    {
      VideoWriter w(path, wo);
      for (int i = 0; i < 250; ++i) w.add_frame(panning_frame(96, 64, i), c.pts_ms.empty() ? -1 : c.pts_ms[i]);
      w.finish();
    }
    VideoReader native(path);  // every frame, in display order
    const std::vector<VideoFrame> shown = all_frames(native);
    ASSERT_EQ(shown.size(), 250u) << c.name;
    for (double fps : {7.0, 3.3, 11.0}) {
      const std::string what = c.name + " at " + std::to_string(fps) + " fps";
      VideoReadOptions o;
      o.target_fps = fps;
      o.threads = 1;  // as each of several readers decodes (frame threads do not skip)
      VideoReader r(path, o);
      const std::vector<VideoFrame> got = all_frames(r);
      ASSERT_GT(got.size(), 20u) << what;
      size_t on = 0;
      for (const VideoFrame& f : got) {
        while (on + 1 < shown.size() && shown[on + 1].source_pts_s <= f.time_s + 1e-9) ++on;
        ASSERT_EQ(f.source_pts_s, shown[on].source_pts_s) << what << ", sample at " << f.time_s;
        ASSERT_EQ(f.image.rgb, shown[on].image.rgb) << what << ", sample at " << f.time_s;
      }
      EXPECT_LT(r.decoded_frames(), 240) << what << ": the unsampled B-frames were decoded";
      // Stretches start at keyframes that MP4 indexes by decode time: each is checked to start at its first sample.
      ParallelVideoReader p(path, o, 3, 1.0);
      expect_same_frames(all_frames(p), got, what + ", 3 readers");
    }
  }
}

// A file cut short: the stretches decoded at once stop where one reader stops, with the same frames
// before it; a caller that stops early leaves no thread behind.
TEST(Video, ParallelReadersStopWhereTheFileIsCut) {
  TESSERA_SKIP_WITHOUT(built_features().ffmpeg);
  test::ScratchDir dir;
  write_counting_video(dir.file("c.mkv"), 300);
  const std::string bytes = test::read_bytes(dir.file("c.mkv"));
  test::write_bytes(dir.file("cut.mkv"), bytes.substr(0, bytes.size() * 3 / 5));
  VideoReadOptions o;
  o.target_fps = 10;
  VideoReader one(dir.file("cut.mkv"), o);
  const std::vector<VideoFrame> want = all_frames(one);
  ASSERT_GT(want.size(), 30u);
  ASSERT_LT(want.size(), 100u);
  ParallelVideoReader r(dir.file("cut.mkv"), o, 3, 1.0);
  expect_same_frames(all_frames(r), want, "cut.mkv");
  {
    ParallelVideoReader early(dir.file("c.mkv"), o, 3, 1.0);
    VideoFrame f;
    ASSERT_TRUE(early.next(f));
  }
}

// A long sample video is a segment repeated by stream copy: every frame decodes, timestamps run on
// across the joins, each copy shows the segment again, and the labels follow the copies.
TEST(Video, RepeatedSegmentsDecodeAsOneLongVideo) {
  TESSERA_SKIP_WITHOUT(built_features().ffmpeg);
  test::ScratchDir dir;
  SampleVideoOptions o;
  o.width = 64, o.height = 48, o.fps = 10, o.seconds = 12, o.segment_seconds = 4;
  const Table labels = write_sample_video(dir.file("long.mp4"), o);
  ASSERT_EQ(labels.rows.size(), 12u);
  for (size_t s = 0; s < 12; ++s) {
    EXPECT_EQ(std::get<std::int64_t>(labels.rows[s][0]), std::int64_t(s));
    EXPECT_EQ(labels.rows[s][1], labels.rows[s % 4][1]) << "second " << s;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("long.mp4.segment.mp4")));
  const VideoInfo in = probe_video(dir.file("long.mp4"));
  EXPECT_NEAR(in.duration_s, 12, 0.11);
  VideoReader r(dir.file("long.mp4"));
  VideoFrame f;
  std::vector<RgbImage> frames;
  while (r.next(f)) {
    EXPECT_NEAR(f.time_s, frames.size() / 10.0, 1e-6) << frames.size();
    frames.push_back(f.image);
  }
  ASSERT_EQ(frames.size(), 120u);
  EXPECT_EQ(frames[40].rgb, frames[0].rgb);   // second copy, first frame
  EXPECT_EQ(frames[119].rgb, frames[39].rgb);  // third copy, last frame
  EXPECT_NE(frames[1].rgb, frames[0].rgb);
  EXPECT_THROW(repeat_video(dir.file("long.mp4"), dir.file("x.mp4"), 0), std::invalid_argument);
  o.seconds = 10;  // not a whole number of segments
  EXPECT_THROW(write_sample_video(dir.file("bad.mp4"), o), std::invalid_argument);
}

}  // namespace
}  // namespace tessera::io
