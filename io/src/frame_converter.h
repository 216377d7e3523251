// Decoded frames to RGB off the decoding thread: a few workers, each with its
// own swscale context, copy device frames to host memory when needed and
// scale. Results come back through futures, in whatever order the caller keeps.
#pragma once
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ffmpeg_util.h"
#include "tessera/io/rgb_image.h"

namespace tessera::io::detail {

// A frame scaled to width x height, of which the centred crop_width x crop_height is kept.
struct OutputSize {
  int width, height, crop_width, crop_height;
};

class FrameConverter {
 public:
  // `path` names the video in errors; `workers` threads (at least one).
  FrameConverter(std::string path, int workers);
  ~FrameConverter();
  FrameConverter(const FrameConverter&) = delete;
  FrameConverter& operator=(const FrameConverter&) = delete;

  // Takes a reference to `frame` (host or device memory) and returns its RGB image (crop_width x crop_height).
  std::future<RgbImage> submit(const AVFrame* frame, OutputSize size);

 private:
  struct Job {
    FramePtr frame;
    OutputSize size;
    std::promise<RgbImage> result;
  };
  void work();

  const std::string path_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tessera::io::detail
