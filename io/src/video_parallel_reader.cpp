// Several VideoReaders over keyframe-aligned stretches of one video, frames returned in order.
// A demuxing pass (no decoding) lists the key packets' times ahead of the readers; stretch s runs
// from the (s-1)-th listed start to the s-th (stretch 0 from the beginning, the last to the end).
// A reader that is free takes the first stretch nobody took, while fewer than 2N stretches are
// decoded or decoding ahead of the caller: a slow stretch holds N readers up only once N more
// stretches are done behind it (fixed turns, a stretch per reader, would wait for each round's
// slowest). Sample times come from one grid, origin + k / fps, whose origin is the first sample
// of stretch 0: every stretch yields exactly the frames one reader would have given for its times.
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include "ffmpeg_util.h"
#include "tessera/io/cores.h"
#include "tessera/io/video.h"

namespace tessera::io {

struct ParallelVideoReader::State {
  VideoInfo info;
  std::string path;
  double step = 0, min_segment_s = 0;
  std::unique_ptr<VideoReader> single;             // readers <= 1
  std::vector<std::unique_ptr<VideoReader>> readers;

  struct Stretch {
    std::vector<VideoFrame> frames;
    bool reached_end = false;  // decoding went past the stretch's end (else the video ended inside it)
    std::exception_ptr error;
  };

  std::mutex mu;
  std::condition_variable cv;
  std::vector<double> starts;  // start time of stretch 1, 2, ...
  bool listed = false;         // the demuxing pass is over: no more starts
  bool origin_known = false;
  double origin = NAN;
  std::map<std::int64_t, Stretch> finished;  // decoded, not yet taken
  std::int64_t taken = 0;                    // stretches handed to the caller's side so far
  std::int64_t claimed = 0;                  // stretches handed to readers so far
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> corrupt{0}, decoded{0};

  // The caller's side: the frames of the stretch being returned.
  std::deque<VideoFrame> current;
  bool current_reached_end = true, ended = false;
  std::exception_ptr current_error;  // rethrown once the frames before it are returned
  std::int64_t out_index = 0;

  std::thread lister;
  std::vector<std::thread> workers;

  void list_starts();
  void work(int w);
  Stretch decode(VideoReader& r, std::int64_t s, double start, double end);
  std::int64_t first_sample_at(double start) const;
};

void ParallelVideoReader::State::list_starts() {
  try {
    VideoInfo probe;
    detail::FormatPtr fmt = detail::open_video_input(path, probe);
    const int vs = probe.video_stream;
    for (unsigned i = 0; i < fmt->nb_streams; ++i)
      if (static_cast<int>(i) != vs) fmt->streams[i]->discard = AVDISCARD_ALL;
    const AVStream* st = fmt->streams[vs];
    const double tb = av_q2d(st->time_base);
    const double start_s = st->start_time != AV_NOPTS_VALUE ? st->start_time * tb : 0;  // as VideoReader's pts
    detail::PacketPtr pkt{av_packet_alloc()};
    double last = NAN;
    while (!stop && av_read_frame(fmt.get(), pkt.get()) >= 0) {
      if (pkt->stream_index == vs && (pkt->flags & AV_PKT_FLAG_KEY) && !(pkt->flags & AV_PKT_FLAG_CORRUPT)) {
        const std::int64_t ts = pkt->pts != AV_NOPTS_VALUE ? pkt->pts : pkt->dts;
        if (ts != AV_NOPTS_VALUE) {
          const double t = ts * tb - start_s;
          if (std::isnan(last)) {
            last = t;  // stretch 0 starts here
          } else if (t >= last + min_segment_s) {
            std::lock_guard<std::mutex> lock(mu);
            starts.push_back(t);
            last = t;
            cv.notify_all();
          }
        }
      }
      av_packet_unref(pkt.get());
    }
  } catch (...) {
    // The readers meet the same damage where it is; the stretches listed so far stay valid.
  }
  std::lock_guard<std::mutex> lock(mu);
  listed = true;
  cv.notify_all();
}

std::int64_t ParallelVideoReader::State::first_sample_at(double start) const {
  std::int64_t k = std::max<std::int64_t>(0, static_cast<std::int64_t>(std::ceil((start - origin) / step)));
  while (k > 0 && origin + static_cast<double>(k - 1) * step >= start) --k;
  while (origin + static_cast<double>(k) * step < start) ++k;
  return k;
}

ParallelVideoReader::State::Stretch ParallelVideoReader::State::decode(VideoReader& r, std::int64_t s, double start,
                                                                        double end) {
  Stretch out;
  try {
    if (s == 0) {
      VideoFrame f;
      const bool any = r.next(f);
      {
        std::lock_guard<std::mutex> lock(mu);
        origin_known = true;
        origin = any ? f.time_s : NAN;
        cv.notify_all();
      }
      if (!any) return out;
      if (f.time_s >= end) {
        out.reached_end = true;
        return out;
      }
      out.frames.push_back(std::move(f));
    } else {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return origin_known || stop; });
      }
      if (stop || std::isnan(origin)) return out;
      r.seek_to_sample(origin, first_sample_at(start));
    }
    VideoFrame f;
    for (;;) {
      if (stop) return out;
      if (!r.next(f)) break;
      if (f.time_s >= end) {
        out.reached_end = true;
        break;
      }
      out.frames.push_back(std::move(f));
    }
  } catch (...) {
    out.error = std::current_exception();
  }
  return out;
}

void ParallelVideoReader::State::work(int w) {
  VideoReader& r = *readers[static_cast<size_t>(w)];
  const std::int64_t window = 2 * static_cast<std::int64_t>(readers.size());  // claimed stretches past `taken`
  std::int64_t counted = 0, decoded_counted = 0;
  for (;;) {
    double start = -INFINITY, end = INFINITY;
    std::int64_t s = 0;
    {
      std::unique_lock<std::mutex> lock(mu);
      // Stretch s exists once its start is listed; its end once the next start is, or the listing is over.
      cv.wait(lock, [&] {
        return stop || (claimed < taken + window && (static_cast<std::int64_t>(starts.size()) > claimed || listed));
      });
      if (stop) return;
      s = claimed;
      if (s > 0 && static_cast<std::int64_t>(starts.size()) < s) return;  // no such stretch: the video is done
      ++claimed;  // the first claim is stretch 0, by a reader that has decoded nothing: it starts at the beginning
      if (s > 0) start = starts[static_cast<size_t>(s - 1)];
      if (static_cast<std::int64_t>(starts.size()) > s) end = starts[static_cast<size_t>(s)];
    }
    Stretch st = decode(r, s, start, end);
    const std::int64_t c = r.corrupt_packets(), d = r.decoded_frames();
    corrupt += c - counted;
    counted = c;
    decoded += d - decoded_counted;
    decoded_counted = d;
    std::lock_guard<std::mutex> lock(mu);
    finished[s] = std::move(st);
    cv.notify_all();
  }
}

ParallelVideoReader::ParallelVideoReader(const std::string& path, const VideoReadOptions& options, int readers,
                                         double min_segment_s)
    : s_(std::make_unique<State>()) {
  if (!(options.target_fps > 0)) throw std::invalid_argument(path + ": parallel decoding needs a sampling rate (target fps > 0)");
  State& s = *s_;
  s.path = path;
  s.step = 1.0 / options.target_fps;
  s.min_segment_s = min_segment_s;
  if (readers <= 1) {
    s.single = std::make_unique<VideoReader>(path, options);
    s.info = s.single->info();
    return;
  }
  // The cores shared out: decoder threads and RGB converters per reader.
  const int cores = usable_cores();
  VideoReadOptions per = options;
  if (per.threads <= 0) per.threads = std::max(1, cores / readers);
  if (per.converters <= 0) per.converters = std::max(1, cores / (4 * readers));
  for (int i = 0; i < readers; ++i) s.readers.push_back(std::make_unique<VideoReader>(path, per));
  s.info = s.readers[0]->info();
  s.lister = std::thread([&s] { s.list_starts(); });
  for (int i = 0; i < readers; ++i) s.workers.emplace_back([&s, i] { s.work(i); });
}

ParallelVideoReader::~ParallelVideoReader() {
  State& s = *s_;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.stop = true;
  }
  s.cv.notify_all();
  if (s.lister.joinable()) s.lister.join();
  for (auto& t : s.workers) t.join();
}

const VideoInfo& ParallelVideoReader::info() const { return s_->info; }
int ParallelVideoReader::readers() const { return s_->single ? 1 : static_cast<int>(s_->readers.size()); }
std::int64_t ParallelVideoReader::corrupt_packets() const {
  return s_->single ? s_->single->corrupt_packets() : s_->corrupt.load();
}
std::int64_t ParallelVideoReader::decoded_frames() const {
  return s_->single ? s_->single->decoded_frames() : s_->decoded.load();
}
bool ParallelVideoReader::hardware_decoding() const {
  return s_->single ? s_->single->hardware_decoding() : s_->readers[0]->hardware_decoding();
}

bool ParallelVideoReader::next(VideoFrame& frame) {
  State& s = *s_;
  if (s.single) return s.single->next(frame);
  while (s.current.empty()) {
    if (s.current_error) {
      s.ended = true;
      std::rethrow_exception(std::exchange(s.current_error, nullptr));
    }
    // A stretch that stopped short of its end means the video ended there: later ones are not returned.
    if (s.ended || !s.current_reached_end) {
      s.ended = true;
      return false;
    }
    State::Stretch st;
    {
      std::unique_lock<std::mutex> lock(s.mu);
      const std::int64_t c = s.taken;
      s.cv.wait(lock, [&] {
        return s.finished.count(c) || (s.listed && c > 0 && static_cast<std::int64_t>(s.starts.size()) < c);
      });
      if (!s.finished.count(c)) {
        s.ended = true;
        return false;
      }
      st = std::move(s.finished[c]);
      s.finished.erase(c);
      ++s.taken;
      s.cv.notify_all();
    }
    s.current.assign(std::make_move_iterator(st.frames.begin()), std::make_move_iterator(st.frames.end()));
    s.current_reached_end = st.reached_end;
    s.current_error = st.error;  // after the frames before it, as one reader would have returned them
  }
  frame = std::move(s.current.front());
  s.current.pop_front();
  frame.index = s.out_index++;
  return true;
}

}  // namespace tessera::io
