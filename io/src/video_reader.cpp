// Streaming decode: demux only the video stream, decode, and hand out RGB
// frames one at a time. Resampling keeps at most two decoded frames: the one
// on screen ("held") and the next one, whose pts tells when "held" ends. The
// frames to output go to converter threads (device copy, scale to RGB) a few
// ahead of the caller, so the decoder never waits on swscale.
#include <algorithm>
#include <cmath>
#include <deque>
#include <set>
#include <stdexcept>

extern "C" {
#include <libavutil/hwcontext.h>
}

#include "ffmpeg_util.h"
#include "frame_converter.h"
#include "log.h"
#include "tessera/io/cores.h"

namespace tessera::io {

struct VideoReader::State {
  VideoInfo info;
  VideoReadOptions opt;
  detail::FormatPtr fmt;
  detail::CodecPtr dec;
  detail::PacketPtr pkt{av_packet_alloc()};
  detail::FramePtr held{av_frame_alloc()}, incoming{av_frame_alloc()};
  bool have_held = false, have_incoming = false;
  bool demux_done = false, decoder_drained = false;
  double tb = 0, start_s = 0, frame_dur = 0;
  double t0 = NAN;              // first sample time when resampling
  double next_t = NAN;          // next sample time when resampling
  double seek_target = 0;
  std::int64_t out_index = 0;
  std::int64_t corrupt = 0;
  std::set<std::int64_t> sent_pts;  // recent packets' presentation times (stream units), for skip_unsampled
  std::int64_t decoded = 0;          // frames that came out of the decoder
  // After a seek: the dts of the first video packet (where it landed), the last seek's landing (a seek again that
  // lands there has nowhere earlier to go), and whether the first frame is yet to be checked.
  std::int64_t landed_dts = AV_NOPTS_VALUE, previous_landing = AV_NOPTS_VALUE;
  bool landing_unchecked = false;
  AVPixelFormat hw_format = AV_PIX_FMT_NONE;  // surface format when decoding on a device
  bool hw_fell_back = false;  // the device was set up but FFmpeg's hwaccel refused it: software frames
  // Output frames being converted, oldest first; at most `lookahead` of them.
  struct Pending {
    std::future<RgbImage> image;
    double time_s, source_pts_s;
    std::int64_t index;
  };
  std::deque<Pending> pending;
  size_t lookahead = 1;
  bool exhausted = false;  // the sampler has nothing more to emit
  std::unique_ptr<detail::FrameConverter> converter;

  void emit(const AVFrame* f, double time_s, double pts_s) {
    const int w = opt.width > 0 ? opt.width : f->width;
    const int h = opt.height > 0 ? opt.height : f->height;
    const detail::OutputSize size{w, h, opt.crop_width > 0 ? std::min(opt.crop_width, w) : w,
                                  opt.crop_height > 0 ? std::min(opt.crop_height, h) : h};
    pending.push_back({converter->submit(f, size), time_s, pts_s, out_index++});
  }

  // The converter's jobs own references to their frames: their futures can go without waiting.
  void drop_pending() { pending.clear(); }

  // FFmpeg asks which output format to use; take the device surfaces when offered.
  static AVPixelFormat pick_format(AVCodecContext* ctx, const AVPixelFormat* offered) {
    const auto* self = static_cast<const State*>(ctx->opaque);
    for (const AVPixelFormat* f = offered; *f != AV_PIX_FMT_NONE; ++f)
      if (*f == self->hw_format) return *f;
    return avcodec_default_get_format(ctx, offered);
  }

  void try_hardware(const AVCodec* codec, const std::string& device) {
    const AVHWDeviceType type = av_hwdevice_find_type_by_name(device.c_str());
    if (type == AV_HWDEVICE_TYPE_NONE) {
      detail::warn(info.path + ": unknown hardware device type '" + device + "'; decoding in software");
      return;
    }
    AVPixelFormat fmt = AV_PIX_FMT_NONE;
    for (int i = 0;; ++i) {
      const AVCodecHWConfig* cfg = avcodec_get_hw_config(codec, i);
      if (!cfg) break;
      if ((cfg->methods & AV_CODEC_HW_CONFIG_METHOD_HW_DEVICE_CTX) && cfg->device_type == type) {
        fmt = cfg->pix_fmt;
        break;
      }
    }
    if (fmt == AV_PIX_FMT_NONE) {
      detail::warn(info.path + ": decoder " + codec->name + " cannot use " + device + "; decoding in software");
      return;
    }
    AVBufferRef* dev = nullptr;
    const int err = av_hwdevice_ctx_create(&dev, type, nullptr, nullptr, 0);
    if (err < 0) {
      detail::warn(info.path + ": no " + device + " device here (" + detail::av_error_text(err) +
                   "); decoding in software");
      return;
    }
    dec->hw_device_ctx = dev;  // the codec context owns the reference now
    // Surfaces stay referenced while held, incoming and queued for conversion: ask for that many more.
    dec->extra_hw_frames = static_cast<int>(lookahead) + 2;
    dec->opaque = this;
    dec->get_format = &State::pick_format;
    hw_format = fmt;
  }

  double pts_seconds(const AVFrame* f) const {
    std::int64_t p = f->best_effort_timestamp;
    if (p == AV_NOPTS_VALUE) p = f->pts;
    return p == AV_NOPTS_VALUE ? NAN : p * tb - start_s;
  }

  void note_corrupt(const std::string& what) {
    ++corrupt;
    // Warn for the first few, then at powers of two: a badly damaged hour of
    // video must not bury the log.
    if (corrupt <= 5 || (corrupt & (corrupt - 1)) == 0)
      detail::warn(info.path + ": " + what + " (skipped; " + std::to_string(corrupt) + " so far)");
  }

  // Resampling, a packet on which no sample time falls is sent with skip_frame = nonref: a frame no other frame
  // refers to (a non-reference B-frame) is then not decoded at all, and the frame before it stays on screen over
  // its time, which no sample reads. Its time on screen runs from its pts to the next frame's in display order,
  // which is at most the smallest later pts among the packets sent so far (reordered packets arrive after those
  // they refer to); a packet with no later pts yet is decoded. The decoder copies skip_frame per packet.
  void skip_unsampled(const AVPacket* p) {
    bool skip = false;
    if (opt.target_fps > 0 && !std::isnan(t0) && p->pts != AV_NOPTS_VALUE) {
      const auto later = sent_pts.upper_bound(p->pts);
      if (later != sent_pts.end()) {
        const double from = p->pts * tb - start_s, until = *later * tb - start_s, step = 1.0 / opt.target_fps;
        // The first sample time at or after `from` (a hair early: ties count as sampled).
        const double k = std::ceil((from - 1e-6 - t0) / step);
        skip = t0 + k * step > until + 1e-6;
      }
      sent_pts.insert(p->pts);
      if (sent_pts.size() > 64) sent_pts.erase(sent_pts.begin());  // only the reorder window matters
    }
    // Frame threads pick skip_frame up late or not at all: only a one-thread decoder skips.
    dec->skip_frame = skip && dec->active_thread_type != FF_THREAD_FRAME ? AVDISCARD_NONREF : AVDISCARD_DEFAULT;
  }

  // A seek lands on the last keyframe whose index time is at or before the target. Some containers index by
  // decode time (MP4), so with reordered frames that keyframe can be shown after the target, and the frames on
  // screen before it (the previous keyframe's) are not decodable from there. When the first frame after a seek
  // comes after the target, seek again from before the keyframe it landed on; false when there is none earlier.
  bool seek_before_landing() {
    const std::int64_t landed = landed_dts;
    const int err = av_seek_frame(fmt.get(), info.video_stream, landed - 1, AVSEEK_FLAG_BACKWARD);
    if (err < 0) return false;
    restart_decoding();
    landing_unchecked = true;
    landed_dts = AV_NOPTS_VALUE;
    previous_landing = landed;
    return true;
  }

  void restart_decoding() {
    drop_pending();
    exhausted = false;
    avcodec_flush_buffers(dec.get());
    av_frame_unref(held.get());
    av_frame_unref(incoming.get());
    have_held = have_incoming = false;
    demux_done = decoder_drained = false;
    sent_pts.clear();
  }

  // Decodes the next frame into `f`; false at the end of the stream.
  bool decode_one(AVFrame* f) {
    for (;;) {
      const int r = avcodec_receive_frame(dec.get(), f);
      if (r == 0) {
        ++decoded;
        if (f->flags & AV_FRAME_FLAG_CORRUPT || f->decode_error_flags) {
          note_corrupt("corrupt frame at " + std::to_string(pts_seconds(f)) + " s");
          av_frame_unref(f);
          continue;
        }
        if (hw_format != AV_PIX_FMT_NONE && f->format != hw_format && !hw_fell_back) {
          hw_fell_back = true;  // FFmpeg falls back inside get_format when the hwaccel fails to start
          detail::warn(info.path + ": hardware decoding did not start; decoding in software");
        }
        if (std::isnan(pts_seconds(f))) {
          // Without a timestamp a frame cannot be placed in time; count it, drop it.
          note_corrupt("frame without timestamp");
          av_frame_unref(f);
          continue;
        }
        if (landing_unchecked) {
          landing_unchecked = false;
          if (pts_seconds(f) > seek_target + 1e-9 && landed_dts != AV_NOPTS_VALUE && seek_before_landing()) {
            av_frame_unref(f);
            continue;
          }
        }
        return true;
      }
      if (r == AVERROR_EOF) {
        decoder_drained = true;
        return false;
      }
      if (r != AVERROR(EAGAIN)) {
        note_corrupt("decode error: " + detail::av_error_text(r));
        continue;
      }
      if (demux_done) {
        // Send the flush packet once; receive_frame then drains to EOF.
        avcodec_send_packet(dec.get(), nullptr);
        continue;
      }
      const int rr = av_read_frame(fmt.get(), pkt.get());
      if (rr < 0) {
        if (rr != AVERROR_EOF) note_corrupt("read error, treating as end of file: " + detail::av_error_text(rr));
        demux_done = true;
        continue;
      }
      if (pkt->stream_index == info.video_stream) {
        if (landing_unchecked && landed_dts == AV_NOPTS_VALUE) {
          landed_dts = pkt->dts;
          // Landed where the last seek did (nothing earlier to go to): the frames from here are all there is.
          if (landed_dts == AV_NOPTS_VALUE || (previous_landing != AV_NOPTS_VALUE && landed_dts >= previous_landing))
            landing_unchecked = false;
        }
        skip_unsampled(pkt.get());
        const int sr = avcodec_send_packet(dec.get(), pkt.get());
        if (sr < 0 && sr != AVERROR(EAGAIN)) note_corrupt("invalid packet: " + detail::av_error_text(sr));
      }
      av_packet_unref(pkt.get());
    }
  }

};

VideoReader::VideoReader(const std::string& path, const VideoReadOptions& options) : s_(std::make_unique<State>()) {
  if (options.target_fps < 0 || !std::isfinite(options.target_fps))
    throw std::invalid_argument(path + ": target fps must be positive or 0 (native)");
  s_->opt = options;
  s_->fmt = detail::open_video_input(path, s_->info);
  const int vs = s_->info.video_stream;
  // Audio, subtitles and data are never demuxed: bounded memory, less work.
  for (unsigned i = 0; i < s_->fmt->nb_streams; ++i)
    if (static_cast<int>(i) != vs) s_->fmt->streams[i]->discard = AVDISCARD_ALL;
  const AVStream* st = s_->fmt->streams[vs];
  const AVCodec* codec = avcodec_find_decoder(st->codecpar->codec_id);
  if (!codec) throw std::runtime_error(path + ": no decoder for codec " + s_->info.codec);
  s_->dec.reset(avcodec_alloc_context3(codec));
  if (!s_->dec) throw std::runtime_error(path + ": out of memory allocating the decoder");
  int err = avcodec_parameters_to_context(s_->dec.get(), st->codecpar);
  if (err < 0) throw std::runtime_error(path + ": bad codec parameters: " + detail::av_error_text(err));
  s_->dec->thread_count = options.threads;
  // Converters: a quarter of the cores (the decoder's threads want the rest), two frames queued each.
  const int workers = options.converters > 0 ? options.converters
                                             : std::clamp(usable_cores() / 4, 1, 4);
  s_->lookahead = static_cast<size_t>(2 * workers);
  s_->converter = std::make_unique<detail::FrameConverter>(path, workers);
  // Ask decoders to check bitstreams and report damage rather than hide it
  // silently; frames they flag as corrupt are then counted and skipped.
  s_->dec->err_recognition |= AV_EF_CRCCHECK | AV_EF_BITSTREAM | AV_EF_BUFFER;
  s_->dec->pkt_timebase = st->time_base;
  if (!options.hw_device.empty()) s_->try_hardware(codec, options.hw_device);
  err = avcodec_open2(s_->dec.get(), codec, nullptr);
  if (err < 0) throw std::runtime_error(path + ": cannot open decoder " + s_->info.codec + ": " + detail::av_error_text(err));
  s_->tb = av_q2d(st->time_base);
  s_->start_s = st->start_time != AV_NOPTS_VALUE ? st->start_time * s_->tb : 0;
  const double fps = s_->info.avg_frame_rate.value() > 0 ? s_->info.avg_frame_rate.value() : s_->info.real_frame_rate.value();
  s_->frame_dur = fps > 0 ? 1.0 / fps : 0.04;
}

VideoReader::~VideoReader() = default;

const VideoInfo& VideoReader::info() const { return s_->info; }
std::int64_t VideoReader::corrupt_packets() const { return s_->corrupt; }
std::int64_t VideoReader::decoded_frames() const { return s_->decoded; }
bool VideoReader::hardware_decoding() const { return s_->hw_format != AV_PIX_FMT_NONE && !s_->hw_fell_back; }

bool VideoReader::next(VideoFrame& frame) {
  State& s = *s_;
  while (s.pending.size() < s.lookahead && !s.exhausted) s.exhausted = !produce_one();
  if (s.pending.empty()) return false;
  State::Pending p = std::move(s.pending.front());
  s.pending.pop_front();
  frame.image = p.image.get();
  frame.time_s = p.time_s;
  frame.source_pts_s = p.source_pts_s;
  frame.index = p.index;
  return true;
}

// Decodes until the next output frame is known and hands it to the converters; false at the end.
bool VideoReader::produce_one() {
  State& s = *s_;
  if (s.opt.target_fps <= 0) {
    // Native rate: every decoded frame at or after the seek target, once.
    while (s.decode_one(s.held.get())) {
      const double t = s.pts_seconds(s.held.get());
      const bool shown = t + 1e-9 >= s.seek_target;
      if (shown) s.emit(s.held.get(), t, t);
      av_frame_unref(s.held.get());
      if (shown) return true;
    }
    return false;
  }
  const double step = 1.0 / s.opt.target_fps;
  for (;;) {
    if (!s.have_held) {
      if (!s.decode_one(s.held.get())) return false;
      s.have_held = true;
      // The first sample is the seek target, or the first frame if it starts later.
      if (std::isnan(s.t0)) s.t0 = s.next_t = std::max(s.seek_target, s.pts_seconds(s.held.get()));
    }
    if (!s.have_incoming && !s.decoder_drained) s.have_incoming = s.decode_one(s.incoming.get());
    // "held" is on screen from its pts until the next frame's pts (or one
    // nominal frame duration at the end of the file).
    const double held_pts = s.pts_seconds(s.held.get());
    const double until = s.have_incoming ? s.pts_seconds(s.incoming.get()) : held_pts + s.frame_dur;
    if (s.next_t < until - 1e-9) {
      s.emit(s.held.get(), s.next_t, held_pts);
      s.next_t = s.t0 + static_cast<double>(s.out_index) * step;  // no drift from summing steps
      return true;
    }
    if (!s.have_incoming) return false;  // end of the video
    std::swap(s.held, s.incoming);
    av_frame_unref(s.incoming.get());
    s.have_incoming = false;
  }
}

void VideoReader::seek(double seconds) {
  State& s = *s_;
  if (!(seconds >= 0) || !std::isfinite(seconds))
    throw std::invalid_argument(s.info.path + ": cannot seek to " + std::to_string(seconds) + " s");
  const std::int64_t ts = static_cast<std::int64_t>(std::floor((seconds + s.start_s) / s.tb));
  // Backward: land on the keyframe at or before the target, then decode forward.
  const int err = av_seek_frame(s.fmt.get(), s.info.video_stream, ts, AVSEEK_FLAG_BACKWARD);
  if (err < 0) throw std::runtime_error(s.info.path + ": cannot seek to " + std::to_string(seconds) + " s: " +
                                        detail::av_error_text(err));
  s.restart_decoding();
  s.landing_unchecked = seconds > 0;
  s.landed_dts = s.previous_landing = AV_NOPTS_VALUE;
  s.seek_target = seconds;
  s.t0 = s.next_t = NAN;
  s.out_index = 0;
}

void VideoReader::seek_to_sample(double origin, std::int64_t first) {
  State& s = *s_;
  if (!(s.opt.target_fps > 0)) throw std::logic_error(s.info.path + ": seek_to_sample needs a resampled reader");
  const double at = origin + static_cast<double>(first) * (1.0 / s.opt.target_fps);
  seek(std::max(0.0, at));
  s.t0 = origin;
  s.next_t = at;
  s.out_index = first;
}

}  // namespace tessera::io
