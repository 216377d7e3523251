// Private FFmpeg helpers: error text, RAII for the C structs, and opening an
// input with only its video stream enabled.
#pragma once

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avutil.h>
}

#include <memory>
#include <string>

#include "tessera/io/video.h"

namespace tessera::io::detail {

std::string av_error_text(int err);

struct FormatCloser {
  void operator()(AVFormatContext* c) const { avformat_close_input(&c); }
};
struct CodecFreer {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameFreer {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketFreer {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
using FormatPtr = std::unique_ptr<AVFormatContext, FormatCloser>;
using CodecPtr = std::unique_ptr<AVCodecContext, CodecFreer>;
using FramePtr = std::unique_ptr<AVFrame, FrameFreer>;
using PacketPtr = std::unique_ptr<AVPacket, PacketFreer>;

// Opens `path`, reads stream info, finds the best video stream and fills
// `info`. Throws naming the file when it is missing, empty, not a container
// FFmpeg knows, or has no video stream.
FormatPtr open_video_input(const std::string& path, VideoInfo& info);

}  // namespace tessera::io::detail
