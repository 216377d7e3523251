// repeat_video: a stream copy of one video track, looped with continued timestamps.
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "ffmpeg_util.h"
#include "tessera/io/atomic_file.h"
#include "tessera/io/video.h"

namespace tessera::io {

void repeat_video(const std::string& in, const std::string& out, int times) {
  if (times < 1) throw std::invalid_argument(out + ": repeat count must be at least 1");
  av_log_set_level(AV_LOG_ERROR);
  write_atomically_keeping_extension(out, [&](const std::string& tmp) {
    auto check = [&](int err, const char* what) {
      if (err < 0) throw std::runtime_error(out + ": " + what + ": " + detail::av_error_text(err));
    };
    AVFormatContext* oc = nullptr;
    check(avformat_alloc_output_context2(&oc, nullptr, nullptr, tmp.c_str()), "no container for this extension");
    std::unique_ptr<AVFormatContext, void (*)(AVFormatContext*)> owned(oc, [](AVFormatContext* c) {
      if (c->pb) avio_closep(&c->pb);
      avformat_free_context(c);
    });
    detail::PacketPtr pkt(av_packet_alloc());
    VideoInfo info;
    detail::FormatPtr ic = detail::open_video_input(in, info);  // opened once, read from the start `times` times
    const int vi = av_find_best_stream(ic.get(), AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
    AVStream* is = ic->streams[vi];
    AVStream* st = avformat_new_stream(oc, nullptr);
    if (!st || !pkt) throw std::runtime_error(out + ": out of memory");
    check(avcodec_parameters_copy(st->codecpar, is->codecpar), "cannot copy stream parameters");
    st->codecpar->codec_tag = 0;
    st->time_base = is->time_base;
    st->avg_frame_rate = is->avg_frame_rate;
    check(avio_open(&oc->pb, tmp.c_str(), AVIO_FLAG_WRITE), "cannot open for writing");
    check(avformat_write_header(oc, nullptr), "cannot write container header");
    int64_t first = AV_NOPTS_VALUE;  // the input's first timestamp
    int64_t offset = 0;              // in the output's time base: where this copy starts
    for (int k = 0; k < times; ++k) {
      if (k > 0) check(av_seek_frame(ic.get(), vi, first, AVSEEK_FLAG_BACKWARD), "cannot go back to the start of the input");
      int64_t end = offset;
      bool any = false;
      while (av_read_frame(ic.get(), pkt.get()) >= 0) {
        if (pkt->stream_index != vi) {
          av_packet_unref(pkt.get());
          continue;
        }
        if (first == AV_NOPTS_VALUE) {
          if (!(pkt->flags & AV_PKT_FLAG_KEY)) throw std::runtime_error(in + ": does not start on a keyframe; cannot be repeated");
          first = pkt->dts != AV_NOPTS_VALUE ? pkt->dts : pkt->pts;
        }
        any = true;
        av_packet_rescale_ts(pkt.get(), is->time_base, st->time_base);
        const int64_t shift = offset - av_rescale_q(first, is->time_base, st->time_base);
        if (pkt->pts != AV_NOPTS_VALUE) pkt->pts += shift;
        if (pkt->dts != AV_NOPTS_VALUE) pkt->dts += shift;
        end = std::max(end, (pkt->pts != AV_NOPTS_VALUE ? pkt->pts : pkt->dts) + std::max<int64_t>(pkt->duration, 1));
        pkt->stream_index = st->index;
        pkt->pos = -1;
        check(av_interleaved_write_frame(oc, pkt.get()), "cannot write packet");
      }
      if (!any) throw std::runtime_error(in + ": no video packets to repeat");
      offset = end;
    }
    check(av_write_trailer(oc), "cannot write container trailer");
  });
}

}  // namespace tessera::io
