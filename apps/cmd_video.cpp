// `tessera video`: a long recording → per-second embeddings, a temporal
// model over the whole procedure, a timeline of labels and a timeline picture.
//
// Frames are sampled at --fps by timestamp and grouped into clips of the
// encoder's num_frames (stride --clip-stride); each clip goes through the
// VideoMAE encoder (a config + weights, or a Hugging Face folder as
// downloaded); its embedding is the mean of its tokens, or a classification
// model's pooled head input; every second of video gets the mean embedding of
// the clips that cover it, and with a classification model also the mean of
// their class probabilities as its label. With --frame-model (a timm-layout
// ViT) every sampled frame is embedded instead and each second gets the mean
// of its frames (video_encoder.h). With --temporal-weights (an
// aggregator saved by models::save_aggregator, rope1d over seconds, with a
// classification head) the whole sequence of seconds goes through that
// long-sequence model and each second gets a label; the timeline picture
// then colours seconds by label, otherwise by the first three principal
// components of the embeddings. Memory is bounded by one clip and the
// per-second embeddings, whatever the video's length. A file that stops
// short of its stated duration (truncated or damaged) keeps the outputs of
// what decoded and fails with one line saying where it stopped. With
// --reference (a phase annotation of the video) the labelled seconds are
// scored against it, per phase, as surgical-phase papers report (video_reference.h).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <future>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "batch.h"
#include "commands.h"
#include "compute_options.h"
#include "progress.h"
#include "report_page.h"
#include "report_video.h"
#include "run_stats.h"
#include "video_encoder.h"
#include "workers.h"
#include "video_reference.h"
#include "tessera/io/atomic_file.h"
#include "tessera/io/table_writer.h"
#include "tessera/models/aggregator.h"
#include "tessera/models/safetensors.h"
#include "tessera/patching/video_clips.h"

namespace tessera::apps {
namespace {

namespace fs = std::filesystem;

struct VideoArgs {
  std::string input, out_dir, temporal, report, reference;
  ComputeOptions compute;
  VideoEncoderArgs encoder;
  std::vector<std::string> labels;
  double fps = 4.0, reference_fps = 25.0;
  std::vector<float> mean = {0.485f, 0.456f, 0.406f}, std = {0.229f, 0.224f, 0.225f};  // ImageNet's, as VideoMAE's processor
  int clip_stride = 0, decode_readers = 0;
  std::string decode = "auto";
  bool json = false, quiet = false;
  batch::Options batch_opts;
  WorkerOptions workers;
};

// The encoder and the temporal model, loaded on their own thread from construction on: the first video's frames
// decode meanwhile. The spec, from the config alone, is known at once.
class VideoModel {
 public:
  VideoModel(const VideoArgs& a, const Compute& c)
      : spec(describe_video_encoder(a.encoder)), dev(c.device), has_temporal(!a.temporal.empty()),
        loading_(std::async(std::launch::async, [&a, c, t0 = std::chrono::steady_clock::now()] {
          Loaded l;
          l.enc = load_video_encoder(a.encoder, c.device, c.dtype);
          if (!a.temporal.empty()) {
            l.temporal = models::load_aggregator(a.temporal);
            if (l.temporal->config().in_dim != l.enc->dim())
              throw std::runtime_error(a.temporal + ": temporal model expects " + std::to_string(l.temporal->config().in_dim) +
                                       "-wide embeddings, the encoder gives " + std::to_string(l.enc->dim()));
            l.temporal->eval();
            l.temporal->to(c.device);
          }
          l.seconds = seconds_since(t0);
          return l;
        })) {}

  const VideoEncoderSpec spec;
  const torch::Device dev;
  const bool has_temporal;

  // Waits for the load (rethrowing its error); the wait counts in stage "wait_for_model".
  VideoEncoder& enc() { return *loaded().enc; }
  models::LongSequenceAggregator& temporal() { return loaded().temporal; }

  // Seconds per stage over every video so far: load_model (on its thread), and on the caller's
  // wait_for_model, wait_for_frames (decoding behind), encode, outputs.
  std::map<std::string, double> stage_seconds;

 private:
  struct Loaded {
    std::unique_ptr<VideoEncoder> enc;
    models::LongSequenceAggregator temporal{nullptr};
    double seconds = 0;
  };
  Loaded& loaded() {
    if (!loaded_) {
      const auto t0 = std::chrono::steady_clock::now();
      loaded_ = loading_.get();
      stage_seconds["wait_for_model"] += seconds_since(t0);
      stage_seconds["load_model"] = loaded_->seconds;
    }
    return *loaded_;
  }
  std::future<Loaded> loading_;
  std::optional<Loaded> loaded_;
};

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

// OUT/<video stem>_embeddings.safetensors: written last, it marks the video done.
std::string embeddings_path(const std::string& out_dir, const std::string& input) {
  return (fs::path(out_dir) / (fs::path(input).stem().string() + "_embeddings.safetensors")).string();
}

// A colour per second: its label's, or from the embedding's first three principal components. [S, 3] in 0..255.
torch::Tensor second_colors(const torch::Tensor& per_second, const torch::Tensor& labels) {
  const int64_t S = per_second.size(0);
  if (labels.defined()) {
    torch::Tensor rgb = torch::empty({S, 3});
    for (int64_t s = 0; s < S; ++s) {
      const auto c = report::class_rgb(labels[s].item<int64_t>());
      for (int k = 0; k < 3; ++k) rgb[s][k] = c[k];
    }
    return rgb;
  }
  auto x = per_second - per_second.mean(0);
  auto [U, Sv, V] = torch::linalg_svd(x.to(torch::kDouble), false);
  auto pcs = x.to(torch::kDouble).matmul(V.narrow(0, 0, std::min<int64_t>(3, V.size(0))).t());
  if (pcs.size(1) < 3) pcs = torch::cat({pcs, torch::zeros({S, 3 - pcs.size(1)}, pcs.options())}, 1);
  auto lo = std::get<0>(pcs.min(0)), hi = std::get<0>(pcs.max(0));
  return ((pcs - lo) / (hi - lo).clamp_min(1e-12) * 255).to(torch::kFloat);
}

cv::Mat timeline_strip(const torch::Tensor& rgb) {
  const int64_t S = rgb.size(0);
  const int width = static_cast<int>(std::max<int64_t>(S, 200)), height = 40;
  cv::Mat strip(height, width, CV_8UC3);
  for (int x = 0; x < width; ++x) {
    const int64_t s = std::min<int64_t>(S - 1, int64_t(x) * S / width);
    const cv::Vec3b c(uint8_t(rgb[s][2].item<float>()), uint8_t(rgb[s][1].item<float>()), uint8_t(rgb[s][0].item<float>()));
    for (int y = 0; y < height; ++y) strip.at<cv::Vec3b>(y, x) = c;  // BGR for imencode
  }
  return strip;
}

// `scored` (when given) collects the video's phase scores against `reference` for a mean over videos.
nlohmann::json video_one(const VideoArgs& a, VideoModel& m, const std::string& input, const std::string& out_dir, double fps,
                         const std::string& embeddings, const std::string& reference,
                         std::vector<train::VideoPhaseScores>* scored = nullptr) {
  // The class names: --labels, else a classification encoder's own (id2label).
  const std::vector<std::string> names = !a.labels.empty() || m.has_temporal ? a.labels : m.spec.class_names;
  std::optional<PhaseReference> ref;
  if (!reference.empty()) {
    if (!m.has_temporal && m.spec.class_names.empty())
      throw std::runtime_error(reference + ": --reference scores labelled seconds; give the model that labels them (--temporal-weights)");
    ref = read_phase_reference(reference, a.reference_fps, names);
  }
  patching::ClipOptions co;
  co.fps = fps;
  co.frames_per_clip = m.spec.frames_per_step;
  co.clip_stride = a.clip_stride > 0 && !m.spec.per_frame ? a.clip_stride : co.frames_per_clip;
  co.size = m.spec.image_size;
  std::copy(a.mean.begin(), a.mean.end(), co.mean.begin());
  std::copy(a.std.begin(), a.std.end(), co.std.begin());
  // NVDEC when asked, or by default when the model runs on a GPU (software decoding if it is not there).
  if (a.decode == "cuda" || (a.decode == "auto" && m.dev.is_cuda())) co.hw_device = "cuda";
  co.decode_readers = a.decode_readers;
  patching::ClipPrefetcher sampler(input, co);  // decodes on its own thread while the model runs
  const double duration = sampler.info().duration_s;
  const int64_t expected_clips =
      duration > 0 ? std::max<int64_t>(1, (int64_t(std::ceil(duration * fps)) + co.clip_stride - 1) / co.clip_stride) : 0;
  const std::string unit = m.spec.per_frame ? "frames" : "clips";
  Progress bar(unit, expected_clips * (m.spec.per_frame ? co.frames_per_clip : 1), a.quiet);

  // Per-second sums of embeddings (a clip counts for every second it covers), and of class probabilities.
  std::map<int64_t, std::pair<torch::Tensor, int64_t>> seconds;
  std::map<int64_t, torch::Tensor> class_probs;
  patching::Clip clip;
  int64_t clips = 0;  // embeddings: clips, or frames on the per-frame path
  double waited = 0, encoded = 0;
  for (;;) {
    auto t0 = std::chrono::steady_clock::now();
    if (!sampler.next(clip)) break;
    waited += seconds_since(t0);
    VideoEncoder& enc = m.enc();  // the first clip waits for the model here
    t0 = std::chrono::steady_clock::now();
    const std::vector<TimedEmbedding> embedded = enc.encode(clip);
    encoded += seconds_since(t0);
    for (const TimedEmbedding& e : embedded) {
      for (int64_t s = int64_t(std::floor(e.first_s)); s <= int64_t(std::floor(e.last_s)); ++s) {
        auto& slot = seconds[s];
        slot.first = slot.first.defined() ? slot.first + e.embedding : e.embedding.clone();
        ++slot.second;
        if (e.probs.defined()) class_probs[s] = class_probs.count(s) ? class_probs[s] + e.probs : e.probs.clone();
      }
      ++clips;
    }
    bar.update(clips);
  }
  bar.finish();
  m.stage_seconds["wait_for_frames"] += waited;
  m.stage_seconds["encode"] += encoded;
  if (seconds.empty()) throw std::runtime_error(input + ": no frames could be sampled");
  const auto outputs_start = std::chrono::steady_clock::now();
  std::vector<torch::Tensor> rows;
  std::vector<float> times;
  for (auto& [s, v] : seconds) {
    rows.push_back(v.first / double(v.second));
    times.push_back(float(s));
  }
  const torch::Tensor per_second = torch::stack(rows);  // [S, D]
  const torch::Tensor t = torch::tensor(times);
  torch::Tensor labels, probs;
  if (!m.has_temporal && !class_probs.empty()) {
    // A classification model labels each second by its clips' mean class probabilities.
    std::vector<torch::Tensor> p;
    for (auto& [s, v] : seconds) p.push_back(class_probs.at(s) / double(v.second));
    probs = torch::stack(p);
    labels = probs.argmax(1);
  }
  if (m.has_temporal) {
    torch::NoGradGuard ng;
    auto out = m.temporal()->forward(per_second.to(m.dev), t.to(m.dev));
    if (out.logits.defined()) {
      probs = torch::softmax(out.logits.to(torch::kCPU), 1);
      labels = probs.argmax(1);
    }
  }
  // Scored before anything is written: an annotation of another length leaves no outputs.
  nlohmann::json phase_metrics;
  if (ref) {
    if (!labels.defined()) throw std::runtime_error(a.temporal + ": the temporal model has no label head to score against --reference");
    std::vector<int64_t> secs;
    for (const auto& kv : seconds) secs.push_back(kv.first);
    const auto classes = std::max<int64_t>(probs.size(1), int64_t(names.size()));
    const train::VideoPhaseScores s = score_timeline(*ref, secs, labels, classes, input);
    phase_metrics = train::phase_metrics_json(train::average_videos({s}), names);
    if (scored) scored->push_back(s);
  }

  const fs::path out(out_dir);
  fs::create_directories(out);
  const std::string name = fs::path(input).stem().string();
  io::Table table;
  table.columns = {"second", unit};
  if (labels.defined()) table.columns.insert(table.columns.end(), {"label", "name", "probability"});
  int64_t i = 0;
  for (auto& [s, v] : seconds) {
    std::vector<io::Cell> row = {s, v.second};
    if (labels.defined()) {
      const int64_t l = labels[i].item<int64_t>();
      row.push_back(l);
      row.push_back(l < int64_t(names.size()) ? names[l] : std::to_string(l));
      row.push_back(double(probs[i][l].item<float>()));
    }
    table.add_row(row);
    ++i;
  }
  io::write_csv((out / (name + "_timeline.csv")).string(), table);
  io::write_json((out / (name + "_timeline.json")).string(), table);
  std::vector<uint8_t> png;
  const torch::Tensor colors = second_colors(per_second, labels);
  cv::imencode(".png", timeline_strip(colors), png);
  io::write_file_atomically((out / (name + "_timeline.png")).string(), std::string(png.begin(), png.end()));
  if (!a.report.empty()) {
    report::VideoTimeline tl;
    int64_t k = 0;
    for (const auto& [s, v] : seconds) {
      tl.seconds.push_back(s);
      tl.colors.push_back({uint8_t(colors[k][0].item<float>()), uint8_t(colors[k][1].item<float>()), uint8_t(colors[k][2].item<float>())});
      if (labels.defined()) {
        const int64_t l = labels[k].item<int64_t>();
        tl.names.push_back(l < int64_t(a.labels.size()) ? a.labels[l] : std::to_string(l));
      }
      ++k;
    }
    report::write_video_report(a.report, sampler.info(), duration, tl, a.quiet);
  }
  // Last: the embeddings file marks the video done.
  try {
    models::safetensors::save(embeddings,
                              {{"embeddings", per_second}, {"seconds", t}},
                              {{"encoder", m.spec.name}, {"fps", std::to_string(fps)}});
  } catch (...) {
    if (!a.report.empty()) report::remove_report(a.report);
    throw;
  }
  m.stage_seconds["outputs"] += seconds_since(outputs_start);
  // A truncated or damaged file: what decoded is kept (written above), and the run fails saying where it stopped.
  const double stopped = sampler.stopped_at();
  if (!std::isnan(stopped))
    throw std::runtime_error(input + ": decoding stopped at " + seconds_text(stopped) + " of " + seconds_text(duration) +
                             " (the file is truncated or damaged there); the " + std::to_string(per_second.size(0)) +
                             " seconds before it are embedded in " + embeddings);
  nlohmann::json r = {{"video", input}, {unit, clips}, {"seconds", per_second.size(0)}, {"dim", per_second.size(1)},
                      {"labelled", labels.defined()}, {"frames_sampled", sampler.frames_sampled()},
                      {"frames_decoded", sampler.frames_decoded()},
                      {"decoder", sampler.hardware_decoding() ? "cuda" : "cpu"},
                      {"decode_readers", sampler.decode_readers()},
                      {"video_seconds", duration > 0 ? duration : double(per_second.size(0))}};
  if (ref) r["reference"] = reference, r["phase_metrics"] = phase_metrics;
  return r;
}

}  // namespace

void add_video(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<VideoArgs>();
  auto* cmd = app.add_subcommand("video", "Embed a long video per second and label its timeline");
  cmd->add_option("input", a->input, "Video file (any container/codec FFmpeg decodes)");
  cmd->add_option("-o,--out", a->out_dir, "Output folder")->required();
  cmd->add_option("--model", a->encoder.model,
                  "Clip encoder: a config (configs/videomae_*.yaml) with --weights, or a Hugging Face VideoMAE folder "
                  "(config.json + model.safetensors or pytorch_model.bin)")
      ->check(CLI::ExistingPath);
  cmd->add_option("--frame-model", a->encoder.frame_model,
                  "Per-frame image encoder instead: a timm-layout ViT config (configs/vit_*.yaml) with --weights; "
                  "every frame sampled at --fps is embedded and the frames of each second averaged")
      ->check(CLI::ExistingFile);
  cmd->add_option("--weights", a->encoder.weights, "Encoder weights for a config file (safetensors or PyTorch .pt/.pth/.bin, original key names)")->check(CLI::ExistingFile);
  cmd->add_option("--weights-prefix", a->encoder.weights_prefix, "Key prefix to strip from the weights")->capture_default_str();
  cmd->add_option("--frame-batch", a->encoder.frame_batch, "Frames per forward pass of a --frame-model")->capture_default_str();
  cmd->add_option("--temporal-weights", a->temporal, "Temporal model with a label head (aggregator safetensors)")->check(CLI::ExistingFile);
  cmd->add_option("--labels", a->labels, "Names of the classes, in order (the temporal model's, or instead of a classifier's id2label)");
  cmd->add_option("--reference", a->reference,
                  "Phase annotation of the video (Cholec80's videoXX-phase.txt: Frame<TAB>Phase, or a CSV frame,phase; names "
                  "from --labels): adds per-phase precision, recall, Jaccard and the accuracy to the JSON")
      ->check(CLI::ExistingFile);
  cmd->add_option("--reference-fps", a->reference_fps, "Frame rate of the --reference annotation (Cholec80: 25)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1000.0));
  cmd->add_option("--fps", a->fps, "Frames sampled per second")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--mean", a->mean, "Per-channel RGB mean of the encoder's normalisation (pixels in 0..1)")
      ->expected(3)
      ->capture_default_str();
  cmd->add_option("--std", a->std, "Per-channel RGB standard deviation of the encoder's normalisation")
      ->expected(3)
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--decode", a->decode,
                  "Where frames are decoded: cuda (NVDEC), cpu, or auto (cuda with a CUDA --device; the CPU when "
                  "NVDEC or the codec's support is missing)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option("--decode-readers", a->decode_readers,
                  "Decoders working at once on keyframe-aligned stretches of the video, each with its share of the cores "
                  "(0: three quarters of the cores, at most 16; 1: one decoder)")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  cmd->add_option("--clip-stride", a->clip_stride, "Sampled frames between clip starts (default: a clip's length)");
  add_compute_options(cmd, a->compute, "fp32, bf16 or fp16: the encoder's weights and activations; embeddings are written as fp32 "
                                       "(default: fp32)");
  cmd->add_flag("--json", a->json, "Print a JSON summary on stdout");
  cmd->add_flag("-q,--quiet", a->quiet, "No progress bars");
  report::add_option(cmd, a->report,
                     "the video (H.264/MP4 in PAGE_files/ when the source does not play in browsers) over its timeline, "
                     "time per phase");
  batch::add_options(cmd, a->batch_opts, "video (header 'video', optional columns fps, reference)");
  add_worker_options(cmd, a->workers);
  cmd->footer(
      "Examples:\n"
      "  tessera video case.mp4 -o out/ --model configs/videomae_base.yaml --weights videomae.safetensors --fps 4\n"
      "  tessera video case.mp4 -o out/ --model videomae-base-finetuned-kinetics/   (a Hugging Face folder as downloaded)\n"
      "  tessera video case.mp4 -o out/ --frame-model configs/vit_b16.yaml --weights endovit.safetensors --fps 1\n"
      "  tessera video video41.mp4 -o out/ --model ... --weights ... --fps 1 --temporal-weights run/model.safetensors \\\n"
      "      --labels Preparation CalotTriangleDissection ... --reference video41-phase.txt --json\n"
      "  tessera video --manifest cases.csv --shard 0/4 -o out/ --model ... --weights ...\n"
      "  tessera video --manifest cases.csv --gpus 0,1 -o out/ --model ... --weights ...   (a worker per GPU)\n"
      "With --manifest: a video whose OUT/<stem>_embeddings.safetensors exists is skipped, a lock per video,\n"
      "a summary per task in OUT/summaries/ ('tessera collect OUT' merges them).");
  cmd->callback([a, &exit_code] {
    const std::vector<std::string> devices = worker_devices(a->workers);
    validate_video_encoder_args(a->encoder);
    const Compute compute = resolve_compute(a->compute, "fp32");
    const RunStats stats(compute.device, compute.precision);
    if (a->batch_opts.manifest.empty()) {
      if (a->input.empty()) throw CLI::ValidationError("input", "give an input or --manifest");
      if (!a->batch_opts.shard.empty()) throw CLI::ValidationError("--shard", "--shard needs --manifest");
      if (a->workers.given()) throw CLI::ValidationError(a->workers.option(), a->workers.option() + " needs --manifest");
      report::check_option(a->report);
      VideoModel m(*a, compute);  // loads while the video starts decoding
      const nlohmann::json r = video_one(*a, m, a->input, a->out_dir, a->fps, embeddings_path(a->out_dir, a->input), a->reference);
      if (a->json) {
        nlohmann::json printed = r;
        printed.erase("video_seconds");
        printed["run"] = stats.json("video_seconds", r["video_seconds"].get<double>());
        printed["run"]["stage_seconds"] = m.stage_seconds;
        std::cout << printed.dump(2) << "\n";
      }
      exit_code = kOk;
      return;
    }

    // A manifest: every row's outputs go to OUT/<video stem>_*.
    if (!a->input.empty()) throw CLI::ValidationError("input", "give an input or --manifest, not both");
    if (!a->report.empty()) throw CLI::ValidationError("--report", "a report is for one video, not --manifest");
    std::vector<batch::ManifestRow> rows;
    batch::Job job = batch::begin_job("video", a->out_dir, a->batch_opts, a->quiet, &rows);
    if (!devices.empty()) {
      exit_code = run_workers(devices, "videos", a->json);
      return;
    }
    fs::create_directories(a->out_dir);
    job.output_of = [a](const batch::ManifestRow& r) { return embeddings_path(a->out_dir, r.input); };
    std::unique_ptr<VideoModel> m;  // only when a video needs it: a rerun over finished videos loads nothing
    if (batch::any_pending(job, rows)) m = std::make_unique<VideoModel>(*a, compute);
    std::vector<train::VideoPhaseScores> scored;
    job.process = [&](const batch::ManifestRow& r, const std::string& output) {
      const double fps = batch::option_double(r, "fps", a->fps);
      if (!(fps > 0)) throw std::runtime_error("column fps: must be positive");
      std::string reference = a->reference;
      if (r.options.count("reference")) {
        const fs::path ref(r.options.at("reference"));
        reference = ref.is_absolute() ? ref.string() : (fs::path(job.manifest).parent_path() / ref).string();
      }
      if (!m) m = std::make_unique<VideoModel>(*a, compute);
      return video_one(*a, *m, r.input, a->out_dir, fps, output, reference, &scored);
    };
    const batch::Result res = batch::run(job, rows);
    if (a->json) {
      double seconds = 0;
      for (const auto& r : res.items)
        if (r.contains("video_seconds")) seconds += r["video_seconds"].get<double>();
      nlohmann::json j = {{"videos", res.items}, {"done", res.done}, {"skipped", res.skipped}, {"failed", res.failed},
                          {"shard", {{"index", job.shard.index}, {"count", job.shard.count}, {"source", job.shard.source}}},
                          {"summary", res.summary_path}, {"run", stats.json("video_seconds", seconds)}};
      if (m) j["run"]["stage_seconds"] = m->stage_seconds;
      // Per video, then over the videos this run scored (skipped ones were scored by the run that did them).
      if (!scored.empty())
        j["phase_metrics"] = train::phase_metrics_json(train::average_videos(scored), a->labels.empty() ? m->spec.class_names : a->labels);
      std::cout << j.dump(2) << "\n";
    }
    exit_code = res.failed ? kFailure : kOk;
  });
}

}  // namespace tessera::apps
