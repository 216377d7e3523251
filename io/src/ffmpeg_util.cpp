#include "ffmpeg_util.h"

extern "C" {
#include <libavutil/display.h>
}

#include <cmath>
#include <filesystem>
#include <stdexcept>

namespace tessera::io {

bool VideoInfo::has_audio() const {
  for (const auto& s : streams)
    if (s == "audio") return true;
  return false;
}

namespace detail {

std::string av_error_text(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {0};
  av_strerror(err, buf, sizeof buf);
  return buf;
}

FormatPtr open_video_input(const std::string& path, VideoInfo& info) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw std::runtime_error(path + ": no such file or folder");
  if (!fs::is_regular_file(path, ec)) throw std::runtime_error(path + ": not a regular file");
  if (fs::file_size(path, ec) == 0) throw std::runtime_error(path + ": file is empty");
  // FFmpeg logs every recoverable glitch to stderr; we report what matters ourselves.
  av_log_set_level(AV_LOG_ERROR);
  AVFormatContext* raw = nullptr;
  int err = avformat_open_input(&raw, path.c_str(), nullptr, nullptr);
  if (err < 0) throw std::runtime_error(path + ": not a video FFmpeg can open: " + av_error_text(err));
  FormatPtr fmt(raw);
  err = avformat_find_stream_info(fmt.get(), nullptr);
  if (err < 0) throw std::runtime_error(path + ": cannot read stream information: " + av_error_text(err));
  const int vs = av_find_best_stream(fmt.get(), AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
  if (vs < 0) throw std::runtime_error(path + ": has no video stream");
  const AVStream* st = fmt->streams[vs];
  const AVCodecParameters* par = st->codecpar;
  if (par->width <= 0 || par->height <= 0) throw std::runtime_error(path + ": video stream has no frame size");

  info = VideoInfo{};
  info.path = path;
  info.container = fmt->iformat && fmt->iformat->name ? fmt->iformat->name : "";
  info.codec = avcodec_get_name(par->codec_id);
  info.width = par->width;
  info.height = par->height;
  info.video_stream = vs;
  info.time_base = {st->time_base.num, st->time_base.den};
  info.avg_frame_rate = {st->avg_frame_rate.num, st->avg_frame_rate.den};
  info.real_frame_rate = {st->r_frame_rate.num, st->r_frame_rate.den};
  if (st->duration != AV_NOPTS_VALUE && st->duration > 0) info.duration_s = st->duration * av_q2d(st->time_base);
  else if (fmt->duration != AV_NOPTS_VALUE && fmt->duration > 0) info.duration_s = fmt->duration / double(AV_TIME_BASE);
  info.frame_count = st->nb_frames > 0 ? st->nb_frames : -1;
  // The display matrix (MP4 'tkhd' rotation) is stream side data in FFmpeg 5.1.
  size_t sd_size = 0;
  if (const uint8_t* sd = av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, &sd_size))
    if (sd_size >= 9 * sizeof(int32_t)) {
      const double r = av_display_rotation_get(reinterpret_cast<const int32_t*>(sd));
      if (std::isfinite(r)) info.rotation_degrees = r == 0 ? 0.0 : r;  // avoid printing -0
    }
  for (unsigned i = 0; i < fmt->nb_streams; ++i) {
    const char* t = av_get_media_type_string(fmt->streams[i]->codecpar->codec_type);
    info.streams.emplace_back(t ? t : "unknown");
  }
  return fmt;
}

}  // namespace detail

VideoInfo probe_video(const std::string& path) {
  VideoInfo info;
  detail::open_video_input(path, info);
  return info;
}

}  // namespace tessera::io
