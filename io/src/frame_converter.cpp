#include "frame_converter.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

extern "C" {
#include <libavutil/hwcontext.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
}

namespace tessera::io::detail {
namespace {

// Narrows `f` (a host frame this converter owns) to the source pixels under the centred crop of its picture
// scaled to size.width x size.height; the left and top edges go down to whole chroma samples.
void crop_to_output(const std::string& path, AVFrame* f, const OutputSize& size) {
  if (size.crop_width >= size.width && size.crop_height >= size.height) return;
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(static_cast<AVPixelFormat>(f->format));
  if (!desc) throw std::runtime_error(path + ": decoded frames have an unknown pixel format");
  auto edges = [](int source, int scaled, int crop, int chroma_shift, size_t& before, size_t& after) {
    const double per = double(source) / scaled;
    const int x0 = (scaled - crop) / 2;  // as a crop of the scaled picture would take it
    const long first = (std::lround(x0 * per) >> chroma_shift) << chroma_shift;
    const long end = std::max(first + 1, std::min<long>(source, std::lround((x0 + crop) * per)));
    before = static_cast<size_t>(first);
    after = static_cast<size_t>(source - end);
  };
  edges(f->width, size.width, size.crop_width, desc->log2_chroma_w, f->crop_left, f->crop_right);
  edges(f->height, size.height, size.crop_height, desc->log2_chroma_h, f->crop_top, f->crop_bottom);
  const int err = av_frame_apply_cropping(f, AV_FRAME_CROP_UNALIGNED);
  if (err < 0) throw std::runtime_error(path + ": cannot crop a decoded frame: " + av_error_text(err));
}

RgbImage to_rgb(const std::string& path, AVFrame* f, const OutputSize& size, SwsContext*& sws, FramePtr& host) {
  if (f->hw_frames_ctx) {  // device surfaces: swscale reads host memory only
    av_frame_unref(host.get());
    const int err = av_hwframe_transfer_data(host.get(), f, 0);
    if (err < 0)
      throw std::runtime_error(path + ": cannot copy a decoded frame from the device: " + av_error_text(err));
    f = host.get();
  }
  crop_to_output(path, f, size);
  const int w = size.crop_width, h = size.crop_height;
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

std::future<RgbImage> FrameConverter::submit(const AVFrame* frame, OutputSize size) {
  Job job{FramePtr(av_frame_clone(frame)), size, {}};
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
      job.result.set_value(to_rgb(path_, job.frame.get(), job.size, sws, host));
    } catch (...) {
      job.result.set_exception(std::current_exception());
    }
  }
  sws_freeContext(sws);
}

}  // namespace tessera::io::detail
