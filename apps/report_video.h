// `video --report`: the video (re-encoded to H.264/MP4 through libavcodec when a browser cannot play the
// source) with its timeline under it and the time spent in each phase.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/io/video.h"

namespace tessera::apps::report {

struct VideoTimeline {
  std::vector<int64_t> seconds;                     // the seconds that have an embedding, ascending
  std::vector<std::array<std::uint8_t, 3>> colors;  // per second
  std::vector<std::string> names;                   // per second: its phase, or empty when unlabelled
};

// Whether browsers play this file as it is (MP4 with H.264/AV1/VP9, WebM with VP8/VP9/AV1).
bool browser_playable(const io::VideoInfo& info);

void write_video_report(const std::string& page, const io::VideoInfo& info, double duration_s, const VideoTimeline& timeline,
                        bool quiet);

}  // namespace tessera::apps::report
