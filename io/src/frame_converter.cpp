#include "frame_converter.h"

#include <stdexcept>

extern "C" {
#include <libavutil/hwcontext.h>
#include <libswscale/swscale.h>
}

namespace tessera::io::detail {
namespace {

RgbImage to_rgb(const std::string& path, AVFrame* f, int w, int h, SwsContext*& sws, FramePtr& host) {
  if (f->hw_frames_ctx) {  // device surfaces: swscale reads host memory only
    av_frame_unref(host.get());
    const int err = av_hwframe_transfer_data(host.get(), f, 0);
    if (err < 0)
      throw std::runtime_error(path + ": cannot copy a decoded frame from the device: " + av_error_text(err));
    f = host.get();
  }
  sws = sws_getCachedContext(sws, f->width, f->height, static_cast<AVPixelFormat>(f->format), w, h, AV_PIX_FMT_RGB24,
                             SWS_BILINEAR, nullptr, nullptr, nullptr);
  if (!sws) throw std::runtime_error(path + ": cannot convert pixel format to RGB");
  RgbImage out(w, h);
  uint8_t* dst[4] = {out.rgb.data(), nullptr, nullptr, nullptr};
  int stride[4] = {w * 3, 0, 0, 0};
  sws_scale(sws, f->data, f->linesize, 0, f->height, dst, stride);
  return out;
}

}  // namespace

FrameConverter::FrameConverter(std::string path, int workers) : path_(std::move(path)) {
  for (int i = 0; i < std::max(1, workers); ++i) threads_.emplace_back([this] { work(); });
}

FrameConverter::~FrameConverter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

std::future<RgbImage> FrameConverter::submit(const AVFrame* frame, int width, int height) {
  Job job{FramePtr(av_frame_clone(frame)), width, height, {}};
  if (!job.frame) throw std::runtime_error(path_ + ": out of memory referencing a decoded frame");
  auto fut = job.result.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
  return fut;
}

void FrameConverter::work() {
  SwsContext* sws = nullptr;
  FramePtr host(av_frame_alloc());
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) break;  // stopping, nothing left
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    try {
      job.result.set_value(to_rgb(path_, job.frame.get(), job.width, job.height, sws, host));
    } catch (...) {
      job.result.set_exception(std::current_exception());
    }
  }
  sws_freeContext(sws);
}

}  // namespace tessera::io::detail
