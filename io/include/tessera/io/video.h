// Video through FFmpeg's libraries (any container and codec they decode):
// metadata, and a streaming RGB decoder that can resample to a target frame
// rate by timestamp and seek. Memory stays bounded by a few frames, whatever
// the length of the file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/io/rgb_image.h"

namespace tessera::io {

struct Rational {
  int num = 0, den = 1;
  double value() const { return den ? static_cast<double>(num) / den : 0.0; }
};

struct VideoInfo {
  std::string path;
  std::string container;          // "mov,mp4,m4a,3gp,3g2,mj2", "matroska,webm", ...
  std::string codec;              // "h264", "mpeg4", ...
  int width = 0, height = 0;
  double duration_s = 0;          // of the video stream, else of the container; 0 when unknown
  std::int64_t frame_count = -1;  // from the container's index; -1 when it does not say
  Rational avg_frame_rate;        // mean over the file
  Rational real_frame_rate;       // FFmpeg's r_frame_rate: the base rate all timestamps fit
  Rational time_base;             // unit of the video stream's timestamps
  // Display rotation from the stream's display matrix, as
  // av_display_rotation_get reports it: show the decoded picture rotated
  // counter-clockwise by this angle (phones in portrait write -90 = 90
  // clockwise). Frames are returned as coded, not rotated.
  double rotation_degrees = 0;
  int video_stream = -1;          // index of the stream decoded
  std::vector<std::string> streams;  // media type of every stream: "video", "audio", "data", "subtitle"
  bool has_audio() const;
};

// Opens the container and reads stream information only.
// Throws std::runtime_error naming the file on any failure.
VideoInfo probe_video(const std::string& path);

struct VideoFrame {
  RgbImage image;
  double time_s = 0;         // sample time: the frame's pts, or k / target_fps when resampling
  double source_pts_s = 0;   // pts of the decoded frame shown at that time
  std::int64_t index = 0;    // 0, 1, 2 ... in output order (reset by seek)
};

struct VideoReadOptions {
  double target_fps = 0;          // 0: every decoded frame at its own pts
  int width = 0, height = 0;      // output size; 0: the coded size
  // The centred crop_width x crop_height of that picture is kept (0: all of it); only the source under it is
  // scaled, which costs less than scaling the whole and cropping after.
  int crop_width = 0, crop_height = 0;
  int threads = 0;                // decoder threads; 0: FFmpeg chooses
  int converters = 0;             // threads turning decoded frames into RGB; 0: a quarter of the cores, at most 4
  // Hardware decoder device type ("cuda" for NVDEC, "vaapi", ...). When the
  // machine or the codec does not offer it, decoding falls back to software
  // with a warning; frames are the same either way (copied to host memory).
  std::string hw_device;
};

// Pull-style decoder. Not thread-safe: one reader per thread.
class VideoReader {
 public:
  explicit VideoReader(const std::string& path, const VideoReadOptions& options = {});
  ~VideoReader();
  VideoReader(const VideoReader&) = delete;
  VideoReader& operator=(const VideoReader&) = delete;

  const VideoInfo& info() const;
  // Fills `frame` with the next output frame; false at the end of the video.
  bool next(VideoFrame& frame);
  // Positions the reader at `seconds` (decoding forward from the keyframe
  // before it). Native rate: the next frame is the first whose pts >=
  // seconds. Resampled: sample times restart at seconds + k / target_fps, the
  // first being the frame on screen at `seconds`. Indices restart at 0.
  void seek(double seconds);
  // Resampled reads only: positions the reader at sample `first` of the grid origin + k / target_fps
  // (decoding forward from the keyframe before it); the sample times and indices continue that grid,
  // computed as a reader that started at `origin` computes them.
  void seek_to_sample(double origin, std::int64_t first);
  // Packets the decoder refused as invalid and frames it flagged as corrupt:
  // skipped with a warning, never fatal.
  std::int64_t corrupt_packets() const;
  // Frames the decoder has given so far. Resampling, a frame on which no sample time falls and that no other
  // frame refers to (a non-reference B-frame) is not decoded at all, so this can be below the frames read.
  std::int64_t decoded_frames() const;
  // Whether frames are decoded by the hardware device asked for (false once a frame came out of
  // software decoding because the device's decoder failed to start).
  bool hardware_decoding() const;

 private:
  bool produce_one();
  struct State;
  std::unique_ptr<State> s_;
};

// A resampled VideoReader's frames, the same ones, decoded by `readers` VideoReaders at once: the
// stream is cut at keyframes (found by a demuxing pass running ahead, no index needed) into
// stretches of at least `min_segment_s`, each taken by the next free reader, and their frames
// returned in order. Each reader decodes from its stretch's keyframe with its own threads: software
// decoders that stop scaling with threads scale with readers. Memory: at most two stretches' frames
// per reader, beside the stretch being returned.
// A stretch that ends before the next one starts (a file cut short) ends the video there, as one
// reader would. Decoding errors are rethrown by next() at the frame where one reader would stop.
class ParallelVideoReader {
 public:
  // options.target_fps must be > 0; readers <= 1: one VideoReader on the caller's thread.
  ParallelVideoReader(const std::string& path, const VideoReadOptions& options, int readers,
                      double min_segment_s = 4.0);
  ~ParallelVideoReader();
  ParallelVideoReader(const ParallelVideoReader&) = delete;
  ParallelVideoReader& operator=(const ParallelVideoReader&) = delete;

  const VideoInfo& info() const;
  bool next(VideoFrame& frame);
  std::int64_t corrupt_packets() const;  // summed over the readers
  std::int64_t decoded_frames() const;   // summed over the readers (VideoReader::decoded_frames)
  bool hardware_decoding() const;
  int readers() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Encodes RGB frames into any container FFmpeg can write (by extension),
// used to make sample videos. The file appears under `path` only after
// finish(); a writer destroyed before that leaves nothing behind.
struct VideoWriteOptions {
  int width = 0, height = 0;
  int fps = 25;                 // nominal frame rate (avg_frame_rate)
  int time_base_den = 0;        // timestamp unit 1/time_base_den; 0: 1/fps
  std::int64_t bit_rate = 2'000'000;
  std::string codec = "mpeg4";  // any encoder name FFmpeg has
  int b_frames = 0;             // most B-frames between reference frames (as recorders' H.264 has); 0: none
  double rotation_degrees = 0;  // display rotation to store, same convention as VideoInfo's
};

class VideoWriter {
 public:
  VideoWriter(const std::string& path, const VideoWriteOptions& options);
  ~VideoWriter();
  VideoWriter(const VideoWriter&) = delete;
  VideoWriter& operator=(const VideoWriter&) = delete;
  // pts in units of 1/time_base_den; -1: one frame after the previous one.
  void add_frame(const RgbImage& frame, std::int64_t pts = -1);
  void finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Writes the video stream of `in` `times` times in a row into `out` (same container kind, by
// extension), packets copied and timestamps continued: hours of video for the cost of encoding a
// segment. `in` must start on a keyframe and hold no B-frames (what VideoWriter writes), so that
// every copy decodes on its own. Written atomically; throws naming the file.
void repeat_video(const std::string& in, const std::string& out, int times);

}  // namespace tessera::io
