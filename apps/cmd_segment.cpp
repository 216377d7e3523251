// `tessera segment`: a CT/MR volume (NIfTI, NRRD, MetaImage or a DICOM
// folder) → a label map on the input's own voxels and geometry, per-label
// volumes, and overlay pictures.
//
// Pipeline (MONAI's transforms, in the order of a bundle's inference.json):
// Orientation(RAS) → Spacing(--spacing, bilinear) → ScaleIntensityRange
// (--a-min/--a-max → b_min..b_max, clipped) or z-score → sliding-window
// inference of a Swin UNETR (--roi, --overlap, --mode, --sw-batch), blending
// the logits → softmax → Invertd (--invert: nearest, or the probabilities
// resampled bilinearly back to the RAS grid) → argmax → back to the input
// orientation → written with the input's geometry. The model config's
// `inference:` section (segment_recipe.h) sets what the command line leaves out.
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "batch.h"
#include "commands.h"
#include "compute_options.h"
#include "progress.h"
#include "read_ahead.h"
#include "report_page.h"
#include "report_segment.h"
#include "run_stats.h"
#include "segment_recipe.h"
#include "workers.h"
#include "tessera/io/atomic_file.h"
#include "tessera/io/dicom_seg.h"
#include "tessera/io/orientation.h"
#include "tessera/io/volume_io.h"
#include "tessera/models/config.h"
#include "tessera/models/linear.h"
#include "tessera/models/state_dict.h"
#include "tessera/models/swin_unetr.h"
#include "tessera/patching/intensity.h"
#include "tessera/patching/resample.h"
#include "tessera/patching/sliding_window.h"
#include "tessera/patching/spacing.h"
#include "tessera/patching/volume_tensor.h"

namespace tessera::apps {
namespace {

namespace fs = std::filesystem;

struct SegmentArgs {
  std::string input, output, model, labels, series, reference, mode = "gaussian", weights_prefix, invert = "nearest", report;
  ComputeOptions compute;
  std::vector<std::string> weights;
  std::vector<int64_t> roi = {96, 96, 96};
  std::vector<double> spacing;
  double overlap = 0.5, a_min = -175, a_max = 250, b_min = 0, b_max = 1;
  bool zscore = false, json = false, quiet = false, clip = true;
  std::vector<std::string> recipe_labels;  // the config's, when --labels is not given
  int sw_batch = 4;
  batch::Options batch_opts;
  WorkerOptions workers;
};

// One input's settings: the command line's, or a manifest row's.
struct SegmentItem {
  std::string input, output, series, reference;
  std::vector<double> spacing;
  std::string report;  // an HTML page to write, or empty
};

struct SegmentModel {
  models::SwinUNETR net{nullptr};
  torch::Device dev = torch::kCPU;
  torch::ScalarType dtype = torch::kFloat;
  double window_seconds = 0;  // in sliding-window inference, over every input so far
  // Seconds per stage over every input so far (load_model, read, preprocess, sliding_window, postprocess, write);
  // `read` is only the wait the model's loading or the previous input's work did not hide. With --manifest an
  // input's outputs are written beside the next input's device part: the stages overlap.
  std::map<std::string, double> stage_seconds;
  std::unique_ptr<std::mutex> stage_mu = std::make_unique<std::mutex>();  // the outputs' stages are timed on their own thread
};

// Adds the time since the last mark to one stage. On the device part, GPU work is waited for so that it lands in
// its own stage; the outputs' part, on the host beside the next input's GPU work, must not wait for that.
class StageClock {
 public:
  StageClock(SegmentModel& m, bool device_part) : m_(m), sync_(device_part && m.dev.is_cuda()), t_(std::chrono::steady_clock::now()) {}
  void mark(const char* stage) {
    if (sync_) torch::cuda::synchronize(m_.dev.has_index() ? m_.dev.index() : -1);
    const auto now = std::chrono::steady_clock::now();
    const std::lock_guard<std::mutex> lock(*m_.stage_mu);
    m_.stage_seconds[stage] += std::chrono::duration<double>(now - t_).count();
    t_ = now;
  }

 private:
  SegmentModel& m_;
  bool sync_;
  std::chrono::steady_clock::time_point t_;
};

std::map<int64_t, std::string> read_label_names(const std::string& path) {
  std::map<int64_t, std::string> names;
  if (path.empty()) return names;
  YAML::Node n;
  try {
    n = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(path + ": not a readable YAML file: " + e.what());
  }
  if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i) names[int64_t(i)] = n[i].as<std::string>();
  } else if (n.IsMap()) {
    for (const auto& kv : n) names[kv.first.as<int64_t>()] = kv.second.as<std::string>();
  } else {
    throw std::runtime_error(path + ": expected a list of names or a map label -> name");
  }
  return names;
}

// Mid-slices (axial, coronal, sagittal) of the windowed image with labels blended in, side by side.
// Radiological display: patient's right on the left, anterior/superior up.
// `img` holds raw values (any device), shown through the window a_min..a_max.
std::string overlay_png(const at::Tensor& img, const at::Tensor& labels, const io::Vec3& sp, double a_min, double a_max) {
  const int64_t X = img.size(0), Y = img.size(1), Z = img.size(2);
  const auto win = [&](const at::Tensor& v) { return patching::scale_intensity_range(v.cpu(), a_min, a_max, 0, 1, true); };
  // [rows, cols] views, flipped for display.
  std::vector<std::pair<at::Tensor, at::Tensor>> views = {
      {win(img.select(2, Z / 2)).t().flip({0, 1}), labels.select(2, Z / 2).t().flip({0, 1})},  // axial
      {win(img.select(1, Y / 2)).t().flip({0, 1}), labels.select(1, Y / 2).t().flip({0, 1})},  // coronal
      {win(img.select(0, X / 2)).t().flip({0, 1}), labels.select(0, X / 2).t().flip({0, 1})}};  // sagittal
  // mm per row and per column of each view
  const std::array<std::pair<double, double>, 3> mm = {{{sp[1], sp[0]}, {sp[2], sp[0]}, {sp[2], sp[1]}}};
  std::vector<cv::Mat> panels;
  for (size_t vi = 0; vi < views.size(); ++vi) {
    auto& [im, lab] = views[vi];
    const int rows = int(im.size(0)), cols = int(im.size(1));
    auto g = (im.clamp(0, 1) * 255).to(at::kByte).contiguous();
    auto l = lab.to(at::kLong).contiguous();
    cv::Mat m(rows, cols, CV_8UC3);
    const uint8_t* gp = g.data_ptr<uint8_t>();
    const int64_t* lp = l.data_ptr<int64_t>();
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const int v = gp[r * cols + c];
        const int64_t k = lp[r * cols + c];
        cv::Vec3b px(v, v, v);
        if (k > 0) {
          const auto col = report::class_rgb(k - 1);
          px = cv::Vec3b(uint8_t((v + col[2]) / 2), uint8_t((v + col[1]) / 2), uint8_t((v + col[0]) / 2));
        }
        m.at<cv::Vec3b>(r, c) = px;
      }
    // Physical aspect (spacing), a common height for the strip.
    cv::Mat scaled;
    const double height_mm = rows * mm[vi].first, width_mm = cols * mm[vi].second;
    cv::resize(m, scaled, cv::Size(std::max(1, int(256.0 * width_mm / height_mm)), 256), 0, 0, cv::INTER_NEAREST);
    panels.push_back(scaled);
  }
  cv::Mat strip;
  cv::hconcat(panels, strip);
  std::vector<uint8_t> buf;
  cv::imencode(".png", strip, buf);
  return std::string(buf.begin(), buf.end());
}

SegmentModel load_model(const SegmentArgs& a, const Compute& c) {
  const auto t0 = std::chrono::steady_clock::now();
  SegmentModel m;
  m.dev = c.device;
  // The device's context is created while the weights are read: both take a fair part of a second.
  std::future<void> context;
  if (m.dev.is_cuda()) context = std::async(std::launch::async, [dev = m.dev] { at::empty({1}, at::device(dev)); });
  {
    const models::ParametersToBeLoaded loaded(c.dtype);  // the checkpoint sets every parameter (a strict load)
    m.net = models::SwinUNETR(models::load_swin_unetr_config(a.model));
  }
  models::KeyMapping km;
  km.prefix = a.weights_prefix;
  models::load_weights(*m.net, a.weights, km);
  m.net->eval();
  m.dtype = c.dtype;
  if (context.valid()) context.get();
  // Module::to(dtype) would also cast integer buffers (Swin's relative-position index): move them, cast only floats.
  m.net->to(m.dev);
  // cuDNN's convolution algorithms: a timed search (of its 3 best guesses) costs more at the first call than one
  // volume's windows win back over its heuristics, and less than a cohort's do (`bench_models --cudnn-benchmark
  // off|3` measures both): searched for a manifest, heuristics for one input.
  if (m.dev.is_cuda()) {
    const bool search = !a.batch_opts.manifest.empty();
    at::globalContext().setBenchmarkCuDNN(search);
    if (search) at::globalContext().setBenchmarkLimitCuDNN(3);
  }
  if (m.dtype != torch::kFloat) {
    torch::NoGradGuard ng;
    for (auto& p : m.net->parameters()) p.set_data(p.to(m.dtype));
    for (auto& b : m.net->buffers())
      if (b.is_floating_point()) b.set_data(b.to(m.dtype));
  }
  if (m.dev.is_cuda()) {
    // One call on zeros pays the kernels' first load (and cuDNN's search) while the input is still being read.
    torch::NoGradGuard ng;
    std::vector<int64_t> shape = {a.sw_batch, m.net->config().in_channels};
    shape.insert(shape.end(), a.roi.begin(), a.roi.end());
    m.net->forward(torch::zeros(shape, torch::TensorOptions().dtype(m.dtype).device(m.dev)));
    torch::cuda::synchronize(m.dev.has_index() ? m.dev.index() : -1);
  }
  m.stage_seconds["load_model"] = seconds_since(t0);
  return m;
}

// The model on `n` windows. On CUDA a short last call is filled up with zero windows: every call then has the
// shape warmed up (and searched for: a new shape would search again, which costs more than the extra windows).
at::Tensor predict(SegmentModel& m, const at::Tensor& windows, int64_t sw_batch) {
  at::Tensor x = windows.to(m.dev, m.dtype);
  const int64_t n = x.size(0);
  if (m.dev.is_cuda() && n < sw_batch) {
    std::vector<int64_t> fill(x.sizes().begin(), x.sizes().end());
    fill[0] = sw_batch - n;
    x = torch::cat({x, torch::zeros(fill, x.options())});
  }
  return m.net->forward(x).narrow(0, 0, n).to(torch::kFloat);
}

// The input as read and turned to RAS: host work, done beside the model's loading or the previous input's inference.
struct SegmentInput {
  io::Volume vol;
  io::Reorientation reo;
  io::Volume ras;
};

SegmentInput read_input(const std::string& input, const std::string& series) {
  io::VolumeReadOptions ro;
  ro.series_uid = series;
  SegmentInput in;
  in.vol = io::read_volume(input, ro);
  in.ras = io::reorient_to_ras(in.vol, &in.reo);
  return in;
}

// `-o NAME.dcm`: a DICOM SEG referencing the input series instead of a label-map volume.
bool is_dicom_seg_output(const std::string& path) {
  std::string ext = path.size() >= 4 ? path.substr(path.size() - 4) : "";
  for (auto& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".dcm";
}

// Checks, before any work, that a DICOM SEG output can be made for this input.
void check_dicom_seg_output(const std::string& input, const std::string& output) {
  if (!is_dicom_seg_output(output)) return;
  if (!io::dicom_seg_supported())
    throw std::runtime_error(output + ": DICOM SEG output needs DCMTK; this tessera was built without it (`tessera doctor`)");
  if (!fs::is_directory(input))
    throw std::runtime_error(output + ": DICOM SEG output (.dcm) needs a DICOM series folder as input, not " + input);
}

// What an input's device part hands its outputs' part: the label map on the host, and what the outputs need.
struct Segmented {
  SegmentInput in;
  at::Tensor labels;  // [1, X, Y, Z] on the RAS grid, on the host
  at::Tensor counts;  // voxels per class, on the host
  int64_t classes = 0;
  bool stitched_on_host = false;
  std::string overlay_png;  // made from the image still on the device: only its three mid-slices leave it
};

// An input's device part: read (`pending`: the input being read, read_input; its errors surface here),
// preprocessed, segmented, the label map back on the host.
Segmented segment_on_device(const SegmentArgs& a, SegmentModel& m, const SegmentItem& it, std::future<SegmentInput> pending) {
  check_dicom_seg_output(it.input, it.output);
  StageClock clock(m, /*device_part=*/true);
  Segmented out;
  out.in = pending.get();
  const io::Volume& ras = out.in.ras;
  clock.mark("read");  // what the model's loading or the previous input did not hide
  // Everything from here to the label map runs on the compute device: resampling, windowing,
  // stitching, softmax and inversion, as MONAI's transforms do on tensors there.
  const at::Tensor ras_t = patching::volume_to_tensor(ras, m.dev);  // [1, X, Y, Z]
  at::Tensor x = ras_t;
  const std::vector<int64_t> ras_size = {x.size(1), x.size(2), x.size(3)};
  const std::vector<double> ras_spacing(ras.geometry.spacing.begin(), ras.geometry.spacing.end());
  if (!it.spacing.empty()) x = patching::spacing_resample(x, ras_spacing, it.spacing, patching::Interp::linear);
  at::Tensor img = a.zscore ? patching::normalize_intensity(x, true, true)
                             : patching::scale_intensity_range(x, a.a_min, a.a_max, a.b_min, a.b_max, a.clip);
  x = at::Tensor();
  clock.mark("preprocess");

  patching::SlidingWindowOptions so;
  so.roi_size = a.roi;
  so.overlap = {a.overlap};
  so.mode = a.mode == "gaussian" ? patching::BlendMode::gaussian : patching::BlendMode::constant;
  so.sw_batch_size = a.sw_batch;
  so.sw_device = m.dev;
  so.device = m.dev;  // stitched where the model runs; on the host when the GPU cannot hold the volume's scores
  std::unique_ptr<Progress> bar;  // made at the first callback, when the window count is known
  so.progress = [&](int64_t done, int64_t total) {
    if (!bar) bar = std::make_unique<Progress>("windows", total, a.quiet);
    bar->update(done);
  };
  const auto predict_windows = [&](const at::Tensor& w) { return predict(m, w, a.sw_batch); };
  at::Tensor probs;
  bool stitched_on_host = false;
  {
    torch::NoGradGuard ng;
    const auto t0 = std::chrono::steady_clock::now();
    // MONAI blends the network's logits; the softmax comes after (Activationsd).
    try {
      probs = patching::sliding_window_inference(img.unsqueeze(0), predict_windows, so);
    } catch (const c10::OutOfMemoryError&) {
      if (!m.dev.is_cuda()) throw;
      stitched_on_host = true;
      so.device = torch::kCPU;
      bar.reset();
      probs = patching::sliding_window_inference(img.unsqueeze(0), predict_windows, so);
    }
    if (m.dev.is_cuda()) torch::cuda::synchronize(m.dev.has_index() ? m.dev.index() : -1);  // -1: the current device
    m.window_seconds += seconds_since(t0);
    img = at::Tensor();
    clock.mark("sliding_window");
    probs = torch::softmax(probs.squeeze(0), 0);  // [C, X', Y', Z']
  }
  if (bar) bar->finish();
  const int64_t classes = probs.size(0);
  at::Tensor labels;  // [1, X, Y, Z] on the RAS grid
  if (it.spacing.empty()) {
    labels = probs.argmax(0, true).to(torch::kInt);
  } else {
    const auto interp = a.invert == "linear" ? patching::Interp::linear : patching::Interp::nearest;
    labels = patching::invert_spacing_argmax(probs, ras_spacing, it.spacing, ras_size, interp);
  }
  probs = at::Tensor();
  out.counts = torch::bincount(labels.flatten().to(torch::kLong), {}, classes).cpu();
  out.labels = labels.to(torch::kCPU, classes <= 256 ? torch::kByte : torch::kInt);
  out.classes = classes;
  out.stitched_on_host = stitched_on_host;
  out.overlay_png = overlay_png(ras_t.squeeze(0), out.labels.squeeze(0), ras.geometry.spacing, a.a_min, a.a_max);
  clock.mark("postprocess");
  return out;
}

// An input's outputs, on the host: the label map on the input's grid, volumes, overlay, report, then the label
// map (or DICOM SEG) last, its existence marking the input done. Returns the input's summary.
nlohmann::json write_outputs(const SegmentArgs& a, SegmentModel& m, const std::map<int64_t, std::string>& names, const SegmentItem& it,
                             const Segmented& seg) {
  StageClock clock(m, /*device_part=*/false);
  const io::Volume& vol = seg.in.vol;
  const io::Volume& ras = seg.in.ras;
  const at::Tensor& labels = seg.labels;
  const at::Tensor& counts = seg.counts;
  const int64_t classes = seg.classes;
  const io::PixelType pt = classes <= 256 ? io::PixelType::kUInt8 : io::PixelType::kUInt16;
  const io::Volume on_input = io::undo_reorientation(patching::tensor_to_volume(labels, ras.geometry, pt), seg.in.reo);
  clock.mark("to_input_grid");
  fs::path outp(it.output);
  if (outp.has_parent_path()) fs::create_directories(outp.parent_path());

  // Per-label voxel counts and volumes on the input grid.
  const double voxel_ml = vol.geometry.spacing[0] * vol.geometry.spacing[1] * vol.geometry.spacing[2] / 1000.0;
  nlohmann::json lj = nlohmann::json::array();
  for (int64_t k = 0; k < classes; ++k) {
    const int64_t n = counts[k].item<int64_t>();
    const auto it = names.find(k);
    lj.push_back({{"label", k}, {"name", it != names.end() ? it->second : (k == 0 ? "background" : "label_" + std::to_string(k))},
                  {"voxels", n}, {"volume_ml", double(n) * voxel_ml}});
  }
  std::string stem = outp.filename().string();
  for (const char* ext : {".nii.gz", ".nii", ".nrrd", ".mha", ".dcm"})
    if (stem.size() > strlen(ext) && stem.compare(stem.size() - strlen(ext), strlen(ext), ext) == 0) {
      stem.resize(stem.size() - strlen(ext));
      break;
    }
  const fs::path dir = outp.has_parent_path() ? outp.parent_path() : fs::path(".");
  if (!it.reference.empty()) {
    // Dice on the input's own voxels, where the reference lives.
    io::VolumeReadOptions ro;
    ro.series_uid = it.series;
    const io::Volume ref = io::read_volume(it.reference, ro);
    // The same grid up to the storage precision of either format (a DICOM series keeps ~1e-6 mm).
    bool same = ref.geometry.size == vol.geometry.size;
    for (int i = 0; i < 3; ++i) {
      same = same && std::abs(ref.geometry.spacing[i] - vol.geometry.spacing[i]) < 1e-4 &&
             std::abs(ref.geometry.origin[i] - vol.geometry.origin[i]) < 1e-3;
      for (int j = 0; j < 3; ++j) same = same && std::abs(ref.geometry.direction[i][j] - vol.geometry.direction[i][j]) < 1e-5;
    }
    if (!same)
      throw std::runtime_error(it.reference + ": the reference's grid (size, spacing, origin, direction) differs from the input's");
    const at::Tensor pred = patching::volume_to_tensor(on_input).to(torch::kLong).flatten();
    const at::Tensor truth = patching::volume_to_tensor(ref).to(torch::kLong).flatten();
    if (truth.min().item<int64_t>() < 0 || truth.max().item<int64_t>() >= classes)
      throw std::runtime_error(it.reference + ": labels outside 0.." + std::to_string(classes - 1));
    const at::Tensor joint = torch::bincount(pred * classes + truth, {}, classes * classes).view({classes, classes});
    for (int64_t k = 1; k < classes; ++k) {
      const double both = joint[k][k].item<double>(), sum = joint[k].sum().item<double>() + joint.select(1, k).sum().item<double>();
      lj[k]["dice"] = sum > 0 ? nlohmann::json(2 * both / sum) : nlohmann::json(nullptr);
    }
  }
  nlohmann::json summary = {{"input", it.input}, {"output", it.output}, {"labels", lj},
                            {"size", {vol.geometry.size[0], vol.geometry.size[1], vol.geometry.size[2]}},
                            {"spacing_mm", vol.geometry.spacing}, {"orientation", io::orientation_code(vol.geometry.direction)}};
  if (!it.reference.empty()) summary["reference"] = it.reference;
  const fs::path volumes_json = dir / (stem + "_volumes.json"), overlay = dir / (stem + "_overlay.png");
  io::write_file_atomically(volumes_json.string(), summary.dump(2) + "\n");
  io::write_file_atomically(overlay.string(), seg.overlay_png);
  clock.mark("volumes_and_overlay");
  // Last: the mask marks the input done; if it or the report cannot be written, neither are their companions.
  try {
    if (!it.report.empty())
      report::write_segment_report(it.report, vol, on_input, summary,
                                   a.zscore ? std::nullopt : std::make_optional(std::make_pair(a.a_min, a.a_max)));
    if (is_dicom_seg_output(it.output)) {
      io::DicomSegOptions so_seg;
      so_seg.series_uid = it.series;
      so_seg.names = names;
      so_seg.algorithm_version = fs::path(a.model).filename().string();
      io::write_dicom_seg(it.output, on_input, it.input, so_seg);
    } else {
      io::write_volume(it.output, on_input, /*compress=*/true, /*gzip_level=*/1);  // a label map: runs compress at any level
    }
  } catch (...) {
    std::error_code ec;
    fs::remove(volumes_json, ec);
    fs::remove(overlay, ec);
    if (!it.report.empty()) report::remove_report(it.report);
    throw;
  }
  clock.mark("write");
  if (seg.stitched_on_host) summary["stitched_on_host"] = true;  // the GPU could not hold the volume's class scores
  return summary;
}

// The model config's `inference:` recipe, for every option the command line left out.
void apply_recipe(SegmentArgs& a, const CLI::App& cmd) {
  const SegmentRecipe r = read_segment_recipe(a.model);
  const auto unset = [&cmd](const char* opt) { return cmd.get_option(opt)->count() == 0; };
  if (r.pixdim && unset("--spacing")) a.spacing = *r.pixdim;
  if (r.spacing_mode == std::optional<std::string>("nearest"))
    throw std::runtime_error(a.model + ": `inference.spacing.mode: nearest` is for label maps; segment resamples images bilinearly");
  if (r.a_min && unset("--a-min")) a.a_min = *r.a_min;
  if (r.a_max && unset("--a-max")) a.a_max = *r.a_max;
  if (r.b_min) a.b_min = *r.b_min;
  if (r.b_max) a.b_max = *r.b_max;
  if (r.clip) a.clip = *r.clip;
  if (r.roi_size && unset("--roi")) a.roi = *r.roi_size;
  if (r.sw_batch_size && unset("--sw-batch")) a.sw_batch = *r.sw_batch_size;
  if (r.overlap && unset("--overlap")) a.overlap = *r.overlap;
  if (r.mode && unset("--mode")) a.mode = *r.mode;
  if (r.nearest_interp && unset("--invert")) a.invert = *r.nearest_interp ? "nearest" : "linear";
  a.recipe_labels = r.labels;
  const int64_t classes = models::load_swin_unetr_config(a.model).out_channels;
  if (!r.labels.empty() && int64_t(r.labels.size()) != classes)
    throw std::runtime_error(a.model + ": `inference.labels` names " + std::to_string(r.labels.size()) + " labels for " +
                             std::to_string(classes) + " output channels");
}

}  // namespace

void add_segment(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<SegmentArgs>();
  auto* cmd = app.add_subcommand("segment", "Segment a CT/MR volume with a Swin UNETR (sliding windows)");
  cmd->add_option("input", a->input, "NIfTI/NRRD/MHA file or DICOM folder");
  cmd->add_option("-o,--out", a->output, "Label map to write (.nii.gz, .nii, .nrrd, .mha; .dcm: a DICOM SEG referencing the input DICOM series); with --manifest, an output folder")->required();
  cmd->add_option("--model", a->model, "Swin UNETR config (configs/swin_unetr_*.yaml)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--weights", a->weights, "Weights (safetensors or PyTorch .pt/.pth/.bin, MONAI key names; shards allowed)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--weights-prefix", a->weights_prefix, "Key prefix to strip from the weights");
  cmd->add_option("--series", a->series, "DICOM series UID when the folder holds several");
  cmd->add_option("--spacing", a->spacing, "Resample to this spacing (mm, x y z) before inference, as MONAI's Spacing")->expected(3);
  cmd->add_option("--invert", a->invert,
                  "After --spacing, back to the input grid: nearest (label of the nearest voxel) or linear (MONAI's Invertd: "
                  "the probabilities resampled bilinearly, then argmax)")
      ->capture_default_str()
      ->check(CLI::IsMember({"nearest", "linear"}));
  cmd->add_option("--roi", a->roi, "Sliding-window size (voxels, x y z)")->expected(3)->capture_default_str();
  cmd->add_option("--overlap", a->overlap, "Window overlap")->capture_default_str()->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--mode", a->mode, "Blending: gaussian or constant")->capture_default_str()->check(CLI::IsMember({"gaussian", "constant"}));
  cmd->add_option("--sw-batch", a->sw_batch, "Windows per model call")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--a-min", a->a_min, "Intensity window low end (HU)")->capture_default_str();
  cmd->add_option("--a-max", a->a_max, "Intensity window high end (HU)")->capture_default_str();
  cmd->add_flag("--zscore", a->zscore, "z-score the non-zero voxels instead of windowing (MR)");
  cmd->add_option("--reference", a->reference, "Ground-truth label map on the input's grid: adds Dice per label to the JSON")
      ->check(CLI::ExistingPath);
  cmd->add_option("--labels", a->labels, "YAML: list of label names, or map label -> name")->check(CLI::ExistingFile);
  add_compute_options(cmd, a->compute, "fp32, bf16 or fp16 (default: fp32)");
  report::add_option(cmd, a->report, "the volume and label map in NiiVue (axial, coronal, sagittal, 3-D), legend with mL and Dice");
  cmd->add_flag("--json", a->json, "Print the summary as JSON on stdout");
  cmd->add_flag("-q,--quiet", a->quiet, "No progress bar");
  batch::add_options(cmd, a->batch_opts, "volume (header 'image'; optional columns output, series, spacing, reference)");
  add_worker_options(cmd, a->workers);
  cmd->footer(
      "A model config with an `inference:` section (configs/swin_unetr_btcv.yaml) supplies the bundle's recipe:\n"
      "spacing, intensity window, sliding window, inversion and label names; options given here override it.\n"
      "Examples:\n"
      "  tessera segment ct.nii.gz -o mask.nii.gz --model configs/swin_unetr_btcv.yaml --weights model.pt\n"
      "  tessera segment ct.nii.gz -o mask.nii.gz --model configs/swin_unetr_btcv.yaml --weights swin_unetr.safetensors --spacing 1.5 1.5 2\n"
      "  tessera segment --manifest cohort.csv --shard 0/4 -o masks/ --model ... --weights ...\n"
      "  tessera segment --manifest cohort.csv --gpus 0,1 -o masks/ --model ... --weights ...   (a worker per GPU)\n"
      "With --manifest, -o is a folder: OUT/<input stem>.nii.gz per row (or the row's `output`), skipped when it exists,\n"
      "a lock per input, a summary per task in OUT/summaries/ ('tessera collect OUT' merges them).");
  cmd->callback([a, cmd, &exit_code] {
    const std::vector<std::string> devices = worker_devices(a->workers);
    apply_recipe(*a, *cmd);
    const Compute compute = resolve_compute(a->compute, "fp32");
    const RunStats stats(compute.device, compute.precision);
    const int64_t stride = 32;  // patch_size^5: every window side must be a multiple
    for (int64_t r : a->roi)
      if (r % stride) throw CLI::ValidationError("--roi", "window sides must be multiples of 32, got " + std::to_string(r));
    auto names = read_label_names(a->labels);
    if (a->labels.empty())
      for (size_t k = 0; k < a->recipe_labels.size(); ++k) names[int64_t(k)] = a->recipe_labels[k];
    auto voxels_of = [](const nlohmann::json& summary) {
      double n = 1;
      for (const auto& d : summary["size"]) n *= d.get<double>();
      return n;
    };
    if (a->batch_opts.manifest.empty()) {
      if (a->input.empty()) throw CLI::ValidationError("input", "give an input or --manifest");
      if (!a->batch_opts.shard.empty()) throw CLI::ValidationError("--shard", "--shard needs --manifest");
      if (a->workers.given()) throw CLI::ValidationError(a->workers.option(), a->workers.option() + " needs --manifest");
      check_dicom_seg_output(a->input, a->output);  // before the model loads
      report::check_option(a->report);
      // The input is read while the model loads (and, on CUDA, makes its first call).
      auto pending = std::async(std::launch::async, read_input, a->input, a->series);
      SegmentModel m = load_model(*a, compute);
      const SegmentItem item{a->input, a->output, a->series, a->reference, a->spacing, a->report};
      const nlohmann::json summary = write_outputs(*a, m, names, item, segment_on_device(*a, m, item, std::move(pending)));
      const auto& lj = summary["labels"];
      if (a->json) {
        // The file keeps the results only; the printed summary adds what the run cost.
        nlohmann::json printed = summary;
        printed["run"] = stats.json("voxels", voxels_of(summary));
        printed["run"]["sliding_window_seconds"] = m.window_seconds;
        printed["run"]["stage_seconds"] = m.stage_seconds;
        std::cout << printed.dump(2) << "\n";
      } else if (!a->quiet) {
        for (const auto& l : lj)
          std::cout << l["label"].get<int64_t>() << "\t" << l["name"].get<std::string>() << "\t" << l["volume_ml"].get<double>() << " mL"
                    << (l.contains("dice") && l["dice"].is_number() ? "\tDice " + std::to_string(l["dice"].get<double>()) : "") << "\n";
      }
      exit_code = kOk;
      return;
    }

    // A manifest: -o is a folder; each row's mask is OUT/<input stem>.nii.gz unless its `output` column says.
    if (!a->input.empty()) throw CLI::ValidationError("input", "give an input or --manifest, not both");
    if (!a->report.empty()) throw CLI::ValidationError("--report", "a report is for one input, not --manifest");
    std::vector<batch::ManifestRow> rows;
    batch::Job job = batch::begin_job("segment", a->output, a->batch_opts, a->quiet, &rows);
    if (!devices.empty()) {
      exit_code = run_workers(devices, "inputs", a->json);
      return;
    }
    fs::create_directories(a->output);
    job.output_of = [a](const batch::ManifestRow& r) {
      const auto it = r.options.find("output");
      if (it != r.options.end()) {
        const fs::path p(it->second);
        return (p.is_absolute() ? p : fs::path(a->output) / p).string();
      }
      std::string name = fs::path(r.input).filename().string();
      if (name.empty()) name = fs::path(r.input).parent_path().filename().string();  // "dicom/"
      if (!fs::is_directory(r.input)) name.resize(name.size() - io::full_extension(name).size());
      return (fs::path(a->output) / (name + ".nii.gz")).string();
    };
    const auto series_of = [&](const batch::ManifestRow& r) { return r.options.count("series") ? r.options.at("series") : a->series; };
    const auto key_of = [&](const batch::ManifestRow& r) { return r.input + "\n" + series_of(r); };
    // The next row's input is read while this one is on the model (and the first while the model loads).
    ReadAhead<SegmentInput> ahead;
    job.upcoming = [&](const batch::ManifestRow& r) {
      ahead.start(key_of(r), [input = r.input, series = series_of(r)] { return read_input(input, series); });
    };
    std::unique_ptr<SegmentModel> m;  // only when an input needs it: a rerun over finished inputs loads nothing
    if (const batch::ManifestRow* first = batch::next_pending(job, rows, 0)) {
      job.upcoming(*first);
      m = std::make_unique<SegmentModel>(load_model(*a, compute));
    }
    // An input's outputs are written while the next input is on the model.
    job.stage = [&](const batch::ManifestRow& r, const std::string& output) -> batch::Job::Finish {
      SegmentItem item{r.input, output, series_of(r), a->reference, a->spacing};
      if (r.options.count("reference")) {
        const fs::path ref(r.options.at("reference"));
        item.reference = ref.is_absolute() ? ref.string() : (fs::path(job.manifest).parent_path() / ref).string();
      }
      if (r.options.count("spacing")) item.spacing = batch::option_doubles(r, "spacing", 3);
      if (!m) m = std::make_unique<SegmentModel>(load_model(*a, compute));
      std::future<SegmentInput> pending =
          ahead.take(key_of(r), [input = r.input, series = item.series] { return read_input(input, series); });
      auto seg = std::make_shared<const Segmented>(segment_on_device(*a, *m, item, std::move(pending)));
      return [&, item, seg, with_reference = !a->reference.empty() || r.options.count("reference") > 0] {
        const nlohmann::json summary = write_outputs(*a, *m, names, item, *seg);
        nlohmann::json extra = {{"voxels", voxels_of(summary)}};
        if (with_reference) {
          nlohmann::json dice = nlohmann::json::object();
          for (const auto& l : summary["labels"])
            if (l.contains("dice")) dice[l["name"].get<std::string>()] = l["dice"];
          extra["dice"] = dice;
        }
        return extra;
      };
    };
    const batch::Result res = batch::run(job, rows);
    if (a->json) {
      double voxels = 0;
      for (const auto& r : res.items)
        if (r.contains("voxels")) voxels += r["voxels"].get<double>();
      nlohmann::json out = {{"inputs", res.items}, {"done", res.done}, {"skipped", res.skipped}, {"failed", res.failed},
                            {"shard", {{"index", job.shard.index}, {"count", job.shard.count}, {"source", job.shard.source}}},
                            {"summary", res.summary_path}, {"run", stats.json("voxels", voxels)}};
      out["run"]["sliding_window_seconds"] = m ? m->window_seconds : 0.0;
      if (m) out["run"]["stage_seconds"] = m->stage_seconds;
      std::cout << out.dump(2) << "\n";
    }
    exit_code = res.failed ? kFailure : kOk;
  });
}

}  // namespace tessera::apps
