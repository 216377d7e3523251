// From a video file to clips for a VideoMAE-style encoder, streaming:
// frames are sampled at `fps` by presentation time (not by frame index:
// variable-frame-rate recordings are common), resized so the short side is
// `size` and centre-cropped to size × size, normalised, and grouped into
// clips of `frames_per_clip` frames whose starts are `clip_stride` sampled
// frames apart. Only the frames of the clip being built are held, so memory
// does not depend on the video's length. Every clip keeps the timestamp of
// each of its frames. Frames are turned upright by the stream's display
// rotation (phones and some endoscopy recorders store it instead of rotating
// the pixels).
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tessera/io/video.h"

namespace tessera::patching {

struct ClipOptions {
  double fps = 4.0;
  int frames_per_clip = 16;
  int clip_stride = 16;  // sampled frames between clip starts (= frames_per_clip: no overlap)
  int size = 224;
  std::string hw_device;  // decode on this device type ("cuda": NVDEC), software if it is not there
  // Readers decoding keyframe-aligned stretches at once (io::ParallelVideoReader); 0: three quarters of the cores, at most 16.
  int decode_readers = 0;
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
};

struct Clip {
  at::Tensor frames;          // [T, 3, size, size] float32, normalised
  std::vector<double> times;  // sample time of each frame (seconds)
  int valid_frames = 0;       // < T only for the last clip, padded by repeating its last frame
  int64_t index = 0;          // 0, 1, 2, ...
};

class ClipSampler {
 public:
  ClipSampler(const std::string& path, const ClipOptions& opts);
  // The next clip; false after the last one (which may be partial).
  bool next(Clip& out);
  const io::VideoInfo& info() const { return reader_->info(); }
  int64_t frames_sampled() const { return sampled_; }
  // Frames the decoders gave (unsampled non-reference frames are not decoded; see io::VideoReader).
  int64_t frames_decoded() const { return reader_->decoded_frames(); }
  bool hardware_decoding() const { return reader_->hardware_decoding(); }
  int decode_readers() const { return reader_->readers(); }
  // After the last clip: the time of the last frame sampled when decoding
  // stopped short of the stream's duration (a truncated or damaged file),
  // NaN when the video ended where it says it does (or does not say).
  double stopped_at() const;

 private:
  bool pull();  // one more sampled frame into the window; false at the end of the video

  ClipOptions opts_;
  std::unique_ptr<io::ParallelVideoReader> reader_;
  std::deque<std::pair<at::Tensor, double>> window_;  // sampled frames not yet past the next clip start
  int quarter_turns_ = 0;  // counter-clockwise, from the display rotation
  double last_time_ = -1;
  int64_t sampled_ = 0, clips_ = 0;
  bool eof_ = false, done_ = false;
};

// A ClipSampler on its own thread, at most `capacity` clips ahead of the consumer: decoding
// overlaps what the consumer does with each clip (the model, on a GPU), and memory stays bounded.
// Opening the video happens in the constructor (its errors throw there); a decoding error is
// rethrown by next().
class ClipPrefetcher {
 public:
  ClipPrefetcher(const std::string& path, const ClipOptions& opts, int capacity = 4);
  ~ClipPrefetcher();
  ClipPrefetcher(const ClipPrefetcher&) = delete;
  ClipPrefetcher& operator=(const ClipPrefetcher&) = delete;

  bool next(Clip& out);
  const io::VideoInfo& info() const { return sampler_.info(); }
  bool hardware_decoding() const { return sampler_.hardware_decoding(); }
  int decode_readers() const { return sampler_.decode_readers(); }
  // As ClipSampler's, once next() has returned false.
  int64_t frames_sampled() const;
  int64_t frames_decoded() const;
  double stopped_at() const;

 private:
  void work();

  ClipSampler sampler_;
  const size_t capacity_;
  std::deque<Clip> ready_;
  bool done_ = false, stop_ = false;
  std::exception_ptr error_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::thread worker_;
};

// A normalised [3, size, size] tensor from a frame whose short side is
// already `size` (the reader resizes): the frame turned counter-clockwise by
// quarter_turns × 90°, then the centred size × size square.
at::Tensor frame_to_tensor(const io::RgbImage& img, int size, const std::array<float, 3>& mean,
                           const std::array<float, 3>& std, int quarter_turns = 0);

// The display rotation (VideoInfo::rotation_degrees, counter-clockwise) as
// counter-clockwise quarter turns 0..3, to the nearest multiple of 90°.
int display_quarter_turns(double rotation_degrees);

// VideoMAE's tubelet patching as a reshape: [T, C, H, W] → [T/t · H/p · W/p, C·t·p·p],
// tokens ordered (time, row, column) and each token's values (channel, t, y, x), i.e. what a
// Conv3d(kernel = stride = (t, p, p)) would see.
at::Tensor tubelet_patches(const at::Tensor& clip, int tubelet = 2, int patch = 16);

}  // namespace tessera::patching
