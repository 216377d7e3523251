// Encoding RGB frames with libavcodec into a container chosen by extension.
// Writes go to a temp file with the same extension (libavformat picks the
// muxer from it) that finish() renames into place.
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

extern "C" {
#include <libavutil/display.h>
#include <libswscale/swscale.h>
}

#include "ffmpeg_util.h"
#include "tessera/io/atomic_file.h"

namespace tessera::io {

struct VideoWriter::State {
  std::string path, tmp;
  VideoWriteOptions opt;
  AVFormatContext* oc = nullptr;
  detail::CodecPtr enc;
  AVStream* st = nullptr;
  detail::FramePtr yuv{av_frame_alloc()};
  detail::PacketPtr pkt{av_packet_alloc()};
  SwsContext* sws = nullptr;
  std::int64_t next_pts = 0, last_pts = -1;
  bool header_written = false, finished = false;

  ~State() {
    sws_freeContext(sws);
    if (oc) {
      if (oc->pb) avio_closep(&oc->pb);
      avformat_free_context(oc);
    }
    if (!finished && !tmp.empty()) std::remove(tmp.c_str());
  }

  void check(int err, const char* what) const {
    if (err < 0) throw std::runtime_error(path + ": " + what + ": " + detail::av_error_text(err));
  }

  // Sends one frame (or nullptr to flush) and writes every packet that comes out.
  void encode(AVFrame* f) {
    check(avcodec_send_frame(enc.get(), f), "encoder refused a frame");
    for (;;) {
      const int r = avcodec_receive_packet(enc.get(), pkt.get());
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return;
      check(r, "encoding failed");
      av_packet_rescale_ts(pkt.get(), enc->time_base, st->time_base);
      pkt->stream_index = st->index;
      check(av_interleaved_write_frame(oc, pkt.get()), "cannot write packet");
    }
  }
};

VideoWriter::VideoWriter(const std::string& path, const VideoWriteOptions& options) : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.path = path;
  s.opt = options;
  if (options.width <= 0 || options.height <= 0 || options.width % 2 || options.height % 2)
    throw std::invalid_argument(path + ": video size must be positive and even (4:2:0 chroma)");
  if (options.fps <= 0) throw std::invalid_argument(path + ": fps must be positive");
  if (options.b_frames < 0) throw std::invalid_argument(path + ": b_frames must be 0 or more");
  av_log_set_level(AV_LOG_ERROR);
  const std::string ext = full_extension(path);
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  s.tmp = dir + "." + name.substr(0, name.size() - ext.size()) + ".tmp." + std::to_string(::getpid()) + ext;

  s.check(avformat_alloc_output_context2(&s.oc, nullptr, nullptr, s.tmp.c_str()), "no container for this extension");
  const AVCodec* codec = avcodec_find_encoder_by_name(options.codec.c_str());
  if (!codec) throw std::runtime_error(path + ": FFmpeg has no encoder '" + options.codec + "'");
  s.st = avformat_new_stream(s.oc, nullptr);
  s.enc.reset(avcodec_alloc_context3(codec));
  if (!s.st || !s.enc) throw std::runtime_error(path + ": out of memory setting up the encoder");
  const int den = options.time_base_den > 0 ? options.time_base_den : options.fps;
  s.enc->width = options.width;
  s.enc->height = options.height;
  s.enc->pix_fmt = AV_PIX_FMT_YUV420P;
  s.enc->time_base = AVRational{1, den};
  s.enc->framerate = AVRational{options.fps, 1};
  s.enc->bit_rate = options.bit_rate;
  s.enc->gop_size = options.fps;  // a keyframe every second keeps seeks short
  s.enc->max_b_frames = options.b_frames;
  if (s.oc->oformat->flags & AVFMT_GLOBALHEADER) s.enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  s.check(avcodec_open2(s.enc.get(), codec, nullptr), "cannot open encoder");
  s.check(avcodec_parameters_from_context(s.st->codecpar, s.enc.get()), "cannot set stream parameters");
  s.st->time_base = s.enc->time_base;
  s.st->avg_frame_rate = AVRational{options.fps, 1};
  if (options.rotation_degrees != 0) {
    // The display matrix the muxer turns into the MP4/MOV 'tkhd' matrix.
    auto* m = reinterpret_cast<int32_t*>(
        av_stream_new_side_data(s.st, AV_PKT_DATA_DISPLAYMATRIX, 9 * sizeof(int32_t)));
    if (!m) throw std::runtime_error(path + ": out of memory for the display matrix");
    // av_display_rotation_set takes a clockwise angle, _get returns a
    // counter-clockwise one; we speak counter-clockwise throughout.
    av_display_rotation_set(m, -options.rotation_degrees);
  }
  s.check(avio_open(&s.oc->pb, s.tmp.c_str(), AVIO_FLAG_WRITE), "cannot open for writing");
  s.check(avformat_write_header(s.oc, nullptr), "cannot write container header");
  s.header_written = true;
  s.yuv->format = AV_PIX_FMT_YUV420P;
  s.yuv->width = options.width;
  s.yuv->height = options.height;
  s.check(av_frame_get_buffer(s.yuv.get(), 0), "cannot allocate a frame");
  s.sws = sws_getContext(options.width, options.height, AV_PIX_FMT_RGB24, options.width, options.height,
                         AV_PIX_FMT_YUV420P, SWS_BICUBIC, nullptr, nullptr, nullptr);
  if (!s.sws) throw std::runtime_error(path + ": cannot set up RGB to YUV conversion");
}

VideoWriter::~VideoWriter() = default;

void VideoWriter::add_frame(const RgbImage& frame, std::int64_t pts) {
  State& s = *s_;
  if (s.finished) throw std::logic_error(s.path + ": add_frame after finish");
  if (frame.width != s.opt.width || frame.height != s.opt.height)
    throw std::invalid_argument(s.path + ": frame is " + std::to_string(frame.width) + "x" +
                                std::to_string(frame.height) + ", the video " + std::to_string(s.opt.width) + "x" +
                                std::to_string(s.opt.height));
  if (pts < 0) pts = s.last_pts + 1;
  if (pts <= s.last_pts) throw std::invalid_argument(s.path + ": frame timestamps must increase");
  s.check(av_frame_make_writable(s.yuv.get()), "frame not writable");
  const uint8_t* src[4] = {frame.rgb.data(), nullptr, nullptr, nullptr};
  const int stride[4] = {frame.width * 3, 0, 0, 0};
  sws_scale(s.sws, src, stride, 0, frame.height, s.yuv->data, s.yuv->linesize);
  s.yuv->pts = pts;
  s.last_pts = pts;
  s.encode(s.yuv.get());
}

void VideoWriter::finish() {
  State& s = *s_;
  if (s.finished) return;
  s.encode(nullptr);
  s.check(av_write_trailer(s.oc), "cannot write container trailer");
  avio_closep(&s.oc->pb);
  if (std::rename(s.tmp.c_str(), s.path.c_str()) != 0)
    throw std::runtime_error(s.path + ": cannot move the finished video into place");
  s.finished = true;
}

}  // namespace tessera::io
