#include "tessera/patching/video_clips.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "tessera/io/cores.h"

namespace tessera::patching {

int display_quarter_turns(double rotation_degrees) {
  if (!std::isfinite(rotation_degrees)) return 0;
  const long turns = std::lround(rotation_degrees / 90.0) % 4;
  return static_cast<int>(turns < 0 ? turns + 4 : turns);
}

at::Tensor frame_to_tensor(const io::RgbImage& img, int size, const std::array<float, 3>& mean,
                           const std::array<float, 3>& std, int quarter_turns) {
  if (img.width < size || img.height < size)
    throw std::invalid_argument("frame_to_tensor: frame " + std::to_string(img.width) + "x" + std::to_string(img.height) +
                                " is smaller than the crop " + std::to_string(size));
  at::Tensor hwc = at::from_blob(const_cast<uint8_t*>(img.rgb.data()), {img.height, img.width, 3}, at::kByte);
  // rot90 from the row axis towards the column axis turns the picture counter-clockwise.
  if (quarter_turns % 4) hwc = at::rot90(hwc, quarter_turns % 4, {0, 1}).contiguous();
  const int64_t rows = hwc.size(0), cols = hwc.size(1);
  const int64_t y0 = (rows - size) / 2, x0 = (cols - size) / 2;
  // Every byte value's normalised float, per channel, computed as (v / 255 - mean) / std: one lookup per
  // pixel instead of a pass over the frame per operation (this runs for every sampled frame).
  std::array<std::array<float, 256>, 3> lut;
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) lut[c][v] = (static_cast<float>(v) / 255.f - mean[c]) / std[c];
  at::Tensor out = at::empty({3, size, size}, at::kFloat);
  float* o = out.data_ptr<float>();
  const uint8_t* src = hwc.data_ptr<uint8_t>();
  const int64_t plane = int64_t(size) * size;
  for (int64_t y = 0; y < size; ++y) {
    const uint8_t* row = src + ((y0 + y) * cols + x0) * 3;
    for (int64_t x = 0; x < size; ++x)
      for (int c = 0; c < 3; ++c) o[c * plane + y * size + x] = lut[c][row[x * 3 + c]];
  }
  return out;
}

ClipSampler::ClipSampler(const std::string& path, const ClipOptions& opts) : opts_(opts) {
  if (!(opts.fps > 0)) throw std::invalid_argument(path + ": clip sampling fps must be > 0");
  if (opts.frames_per_clip < 1 || opts.clip_stride < 1 || opts.size < 1)
    throw std::invalid_argument(path + ": frames_per_clip, clip_stride and size must be >= 1");
  const io::VideoInfo info = io::probe_video(path);
  // Short side to `size`, aspect kept, and the centred square kept: the reader scales only the source under it.
  // (frame_to_tensor crops a square again: a no-op here, needed for frames given to it otherwise.)
  io::VideoReadOptions ro;
  ro.target_fps = opts.fps;
  ro.hw_device = opts.hw_device;
  if (info.width <= info.height) {
    ro.width = opts.size;
    ro.height = std::max(opts.size, int(std::lround(double(info.height) * opts.size / info.width)));
  } else {
    ro.height = opts.size;
    ro.width = std::max(opts.size, int(std::lround(double(info.width) * opts.size / info.height)));
  }
  ro.crop_width = ro.crop_height = opts.size;
  // Many one-thread decoders use the cores better than a few with FFmpeg's frame threads (less CPU per frame, no
  // wait on a slow frame); a quarter of the cores is left for the RGB conversion and the encoder's feeding. Capped:
  // each decoder holds frames in flight.
  const int readers = opts.decode_readers > 0 ? opts.decode_readers : std::clamp(io::usable_cores() * 3 / 4, 1, 16);
  reader_ = std::make_unique<io::ParallelVideoReader>(path, ro, readers);
  quarter_turns_ = display_quarter_turns(info.rotation_degrees);
}

double ClipSampler::stopped_at() const {
  const io::VideoInfo& i = reader_->info();
  if (!eof_ || last_time_ < 0 || !(i.duration_s > 0)) return NAN;
  const double native = i.avg_frame_rate.value() > 0 ? i.avg_frame_rate.value() : i.real_frame_rate.value();
  // A complete video's last sample lies within one sampling step and a frame or two of its end.
  const double slack = 1.0 / opts_.fps + (native > 0 ? 2.0 / native : 0.1) + 0.05;
  return last_time_ + slack < i.duration_s ? last_time_ : NAN;
}

bool ClipSampler::pull() {
  if (eof_) return false;
  io::VideoFrame f;
  if (!reader_->next(f)) {
    eof_ = true;
    return false;
  }
  window_.emplace_back(frame_to_tensor(f.image, opts_.size, opts_.mean, opts_.std, quarter_turns_), f.time_s);
  last_time_ = f.time_s;
  ++sampled_;
  return true;
}

bool ClipSampler::next(Clip& out) {
  if (done_) return false;
  const size_t T = static_cast<size_t>(opts_.frames_per_clip);
  while (window_.size() < T && pull()) {
  }
  if (window_.empty()) {
    done_ = true;
    return false;
  }
  out.valid_frames = static_cast<int>(std::min(window_.size(), T));
  std::vector<at::Tensor> frames;
  out.times.clear();
  for (size_t i = 0; i < T; ++i) {
    const auto& fr = window_[std::min(i, window_.size() - 1)];
    frames.push_back(fr.first);
    out.times.push_back(i < window_.size() ? fr.second : window_.back().second);
  }
  out.frames = at::stack(frames);
  out.index = clips_++;
  if (window_.size() < T) {  // the video ended inside this clip: it was the last
    done_ = true;
    return true;
  }
  // Advance to the next clip start: drop `stride` frames (pulling more if the stride exceeds the clip).
  for (int s = 0; s < opts_.clip_stride; ++s) {
    if (window_.empty() && !pull()) break;
    window_.pop_front();
  }
  if (window_.empty() && !pull()) done_ = true;
  return true;
}

at::Tensor tubelet_patches(const at::Tensor& clip, int t, int p) {
  if (clip.dim() != 4) throw std::invalid_argument("tubelet_patches: clip must be [T, C, H, W]");
  const int64_t T = clip.size(0), C = clip.size(1), H = clip.size(2), W = clip.size(3);
  if (T % t || H % p || W % p)
    throw std::invalid_argument("tubelet_patches: clip [" + std::to_string(T) + ", " + std::to_string(C) + ", " +
                                std::to_string(H) + ", " + std::to_string(W) + "] is not divisible by the tubelet " +
                                std::to_string(t) + "x" + std::to_string(p) + "x" + std::to_string(p));
  // [T/t, t, C, H/p, p, W/p, p] → [T/t, H/p, W/p, C, t, p, p]
  return clip.reshape({T / t, t, C, H / p, p, W / p, p})
      .permute({0, 3, 5, 2, 1, 4, 6})
      .reshape({(T / t) * (H / p) * (W / p), C * t * p * p});
}

ClipPrefetcher::ClipPrefetcher(const std::string& path, const ClipOptions& opts, int capacity)
    : sampler_(path, opts), capacity_(static_cast<size_t>(std::max(1, capacity))), worker_([this] { work(); }) {}

ClipPrefetcher::~ClipPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void ClipPrefetcher::work() {
  for (;;) {
    Clip clip;
    bool more = false;
    std::exception_ptr error;
    try {
      more = sampler_.next(clip);
    } catch (...) {
      error = std::current_exception();
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_ || ready_.size() < capacity_; });
    if (stop_) return;
    if (error || !more) {
      error_ = error;
      done_ = true;
      cv_.notify_all();
      return;
    }
    ready_.push_back(std::move(clip));
    cv_.notify_all();
  }
}

bool ClipPrefetcher::next(Clip& out) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !ready_.empty() || done_; });
  if (!ready_.empty()) {
    out = std::move(ready_.front());
    ready_.pop_front();
    cv_.notify_all();
    return true;
  }
  if (error_) std::rethrow_exception(error_);
  return false;
}

int64_t ClipPrefetcher::frames_sampled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ ? sampler_.frames_sampled() : -1;
}

int64_t ClipPrefetcher::frames_decoded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ ? sampler_.frames_decoded() : -1;
}

double ClipPrefetcher::stopped_at() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ ? sampler_.stopped_at() : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace tessera::patching
