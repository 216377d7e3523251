// `tessera embed-wsi`: whole-slide images → tile features (Trident/CLAM HDF5)
// and a slide embedding, resumable and shardable across workers.
//
// Per slide: tissue mask → tile grid at the encoder's µm/px and tile size
// (its config's `preprocess`, or --target-mpp / --tile-size) → centre crop and
// mean/std as the config says → batches through the ViT tile encoder, pooled
// as the config says (Virchow2: class token ++ patch mean, 2560-d) →
// DIR/features/<slide>.h5, a thumbnail with
// the tissue contour and the kept tiles → DIR/thumbnails/<slide>.png, and the
// slide embedding → DIR/slide_embeddings/<slide>.json: the long-sequence
// aggregator's pooled output when --aggregator-weights is given (a
// safetensors file whose metadata "aggregator_config" holds its config),
// Prov-GigaPath's LongNetViT slide encoder's when --slide-encoder and
// --slide-weights are (its config and e.g. the published slide_encoder.pth;
// tiles at their level-0 coordinates, as GigaPath's pipeline passes them), the
// mean of the tile features otherwise. A slide whose features file exists is
// skipped; a lock file keeps two workers off one slide; a failing slide is
// logged and the others go on (exit code 1 at the end).
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <optional>
#include <thread>
#include <nlohmann/json.hpp>

#include "batch.h"
#include "commands.h"
#include "compute_options.h"
#include "own_storage.h"
#include "progress.h"
#include "read_ahead.h"
#include "report_page.h"
#include "report_wsi.h"
#include "run_stats.h"
#include "workers.h"
#include "tessera/io/atomic_file.h"
#include "tessera/io/cores.h"
#include "tessera/io/features_h5.h"
#include "tessera/io/slide.h"
#include "tessera/models/aggregator.h"
#include "tessera/models/config.h"
#include "tessera/models/linear.h"
#include "tessera/models/longnet.h"
#include "tessera/models/safetensors.h"
#include "tessera/models/state_dict.h"
#include "tessera/models/vit.h"
#include "tessera/models/vit_weights.h"
#include "tessera/patching/sequence_packing.h"
#include "tessera/patching/slide_tiling.h"
#include "tessera/patching/tile_loader.h"
#include "tessera/torch/copy_stream.h"

namespace tessera::apps {
namespace {

namespace fs = std::filesystem;

struct EmbedArgs {
  std::vector<std::string> slides;
  std::string out_dir, model, weights_prefix = "weights.", aggregator_weights;
  ComputeOptions compute;
  std::string slide_encoder, slide_weights, slide_weights_prefix, report;
  batch::Options batch_opts;
  WorkerOptions workers;
  std::vector<std::string> weights;
  double target_mpp = 0, min_tissue = 0.5, fallback_mpp = 0;  // target_mpp 0: the config's
  int tile_size = 0, batch = 32;
  int threads = io::usable_cores();
  bool json = false, quiet = false, weights_prefix_given = false;
};

// The side the encoder is fed: the config's centre crop of the tile, else the tile itself.
int64_t fed_side(const models::ViTConfig& c, int64_t tile_side) { return c.preprocess.crop > 0 ? c.preprocess.crop : tile_side; }

// Tile side read at the target µm/px: --tile-size, else the config's preprocess.tile_size, else img_size.
int64_t tile_size(const EmbedArgs& a, const models::ViTConfig& c) {
  const int64_t side = a.tile_size > 0 ? a.tile_size : (c.preprocess.tile_size > 0 ? c.preprocess.tile_size : c.img_size);
  if (c.preprocess.crop > side)
    throw std::runtime_error("--tile-size " + std::to_string(side) + " is smaller than the centre crop (" +
                             std::to_string(c.preprocess.crop) + ") that " + a.model + " asks for");
  const int64_t fed = fed_side(c, side);
  if (!c.dynamic_img_size && fed != c.img_size)
    throw std::runtime_error(a.model + " takes " + std::to_string(c.img_size) + "-pixel tiles only (dynamic_img_size: false); --tile-size " +
                             std::to_string(side) + " gives " + std::to_string(fed));
  return side;
}

struct Encoder {
  models::VisionTransformer vit{nullptr};
  models::LongSequenceAggregator aggregator{nullptr};
  models::LongNetViT slide_encoder{nullptr};
  torch::Device device = torch::kCPU;
  torch::ScalarType dtype = torch::kFloat;  // the tile encoder's weights and activations
  std::string name;
  // The load's parts, for --json: the file read (this thread) beside the model built and its first batch run
  // (the other), then the file's tensors copied into the model.
  double read_seconds = 0, build_seconds = 0, apply_seconds = 0;
  double first_batch_seconds = 0;  // the part of build_seconds after the model was on the device
};

Encoder load_encoder(const EmbedArgs& a, const models::ViTConfig& cfg, const Compute& compute) {
  Encoder e;
  e.device = compute.device;
  e.dtype = compute.dtype;
  // While the weights are read (onto the device, in page-locked chunks), the CUDA context is made and the model built
  // there, its linear layers' weights left for the checkpoint (a strict load sets every parameter): the file's
  // tensors are copied in once, device to device.
  // One batch of the slides' shape then runs on the unloaded model: the first batch's one-time costs (kernels
  // loaded, cuBLAS's handle and workspace, the allocator's pool) are paid while the file is still being read.
  const int64_t fed = fed_side(cfg, tile_size(a, cfg));
  std::future<models::VisionTransformer> built =
      std::async(std::launch::async, [&cfg, &e, batch = a.batch, fed, dev = e.device, dtype = e.dtype] {
        const auto t0 = std::chrono::steady_clock::now();
        models::VisionTransformer vit{nullptr};
        {
          const models::ParametersToBeLoaded loaded(dtype, dev);
          vit = models::VisionTransformer(cfg);
        }
        vit->eval();
        vit->to(dev, dtype);  // the rest (norms, tokens, position table, patch embedding)
        if (dev.is_cuda()) {
          torch::cuda::synchronize(dev.index());
          const auto t1 = std::chrono::steady_clock::now();
          torch::NoGradGuard ng;
          vit->forward_embedding(torch::zeros({batch, 3, fed, fed}, at::device(dev).dtype(dtype)));
          torch::cuda::synchronize(dev.index());
          e.first_batch_seconds = seconds_since(t1);
        }
        e.build_seconds = seconds_since(t0);
        return vit;
      });
  models::KeyMapping km;
  km.prefix = a.weights_prefix;
  km.prefix_optional = !a.weights_prefix_given;  // the default fits the fixtures' "weights." files and plain checkpoints
  const auto t0 = std::chrono::steady_clock::now();
  models::StateDict state = models::read_weights(a.weights, km, e.device);  // on a GPU: straight there, in chunks
  e.read_seconds = seconds_since(t0);
  e.vit = built.get();
  const auto t1 = std::chrono::steady_clock::now();
  models::apply_vit_weights(*e.vit, std::move(state), a.weights);
  if (e.device.is_cuda()) torch::cuda::synchronize(e.device.index());
  e.apply_seconds = seconds_since(t1);
  e.name = fs::path(a.model).stem().string();
  if (!a.aggregator_weights.empty()) {
    e.aggregator = models::load_aggregator(a.aggregator_weights);
    e.aggregator->eval();
    e.aggregator->to(e.device);
  }
  if (!a.slide_encoder.empty()) {
    {
      const models::ParametersToBeLoaded loaded;
      e.slide_encoder = models::LongNetViT(models::load_longnet_vit_config(a.slide_encoder));
    }
    if (e.slide_encoder->config().in_chans != e.vit->pooled_dim())
      throw std::runtime_error(a.slide_encoder + ": the slide encoder takes " + std::to_string(e.slide_encoder->config().in_chans) +
                               "-d tile features, " + a.model + " gives " + std::to_string(e.vit->pooled_dim()));
    models::KeyMapping km;
    km.prefix = a.slide_weights_prefix;
    models::load_longnet_vit_weights(*e.slide_encoder, {a.slide_weights}, km);
    e.slide_encoder->eval();
    e.slide_encoder->to(e.device);
  }
  return e;
}

// DIR/features/<slide>.h5: written last, it marks the slide done.
std::string features_path(const std::string& out_dir, const std::string& slide) {
  return (fs::path(out_dir) / "features" / (fs::path(slide).stem().string() + ".h5")).string();
}

// Per tile, its logit for the slide's predicted class. The head is linear and the slide's embedding is the
// mean of the tiles' tokens, so these logits average to the slide's: each is the tile's share of it.
report::TileScores tile_scores(models::LongSequenceAggregatorImpl& agg, const models::AggregatorOutput& out) {
  const torch::Tensor per_tile = agg.head->forward(out.tokens).to(torch::kCPU).to(torch::kFloat).contiguous();  // [N, C]
  const int64_t c = per_tile.mean(0).argmax().item<int64_t>();
  const torch::Tensor s = per_tile.select(1, c).contiguous();
  return {std::vector<float>(s.data_ptr<float>(), s.data_ptr<float>() + s.numel()),
          "Aggregator head: each tile's logit for class " + std::to_string(c) +
              " (the slide's predicted class); their mean is the slide's logit."};
}

// A slide up to its first tiles: opened, its tissue found, its tiles laid out, and a loader reading them.
// Host work only, so the next slide is made ready while the current one is on the model. Held by pointer:
// the loader keeps references to the slide and the grid.
struct PreparedSlide {
  std::unique_ptr<io::Slide> slide;
  patching::TissueMask tissue;
  patching::TileGrid grid;
  double target_mpp = 0;
  std::unique_ptr<patching::TileLoader> loader;
  std::string thumbnail_png;  // tissue contour and kept tiles, drawn while the tiles are read
};

// Needs the encoder's config (tile size, crop, µm/px), not its weights: the first slide is prepared while they load.
std::shared_ptr<PreparedSlide> prepare_slide(const std::string& path, double fallback_mpp, const EmbedArgs& a,
                                             const models::ViTConfig& cfg, bool cuda) {
  auto p = std::make_shared<PreparedSlide>();
  io::SlideOpenOptions so;
  so.fallback_mpp = fallback_mpp;
  p->slide = std::make_unique<io::Slide>(path, so);
  p->tissue = patching::detect_tissue(*p->slide);
  const auto& pre = cfg.preprocess;
  p->target_mpp = a.target_mpp > 0 ? a.target_mpp : pre.target_mpp;
  patching::TileGridOptions go;
  go.target_mpp = p->target_mpp;
  go.tile_size = static_cast<int>(tile_size(a, cfg));
  go.min_tissue_fraction = a.min_tissue;
  p->grid = patching::make_tile_grid(*p->slide, p->tissue, go);
  if (p->grid.coords.empty()) throw std::runtime_error(path + ": no tissue tiles at " + std::to_string(p->target_mpp) + " µm/px");
  patching::TileLoaderOptions lo;
  lo.batch_size = a.batch;
  lo.threads = a.threads;
  lo.crop = static_cast<int>(pre.crop);
  // Page-locked 8-bit batches: the copy to the GPU runs while the host reads the next tiles.
  lo.pin_memory = cuda;
  p->loader = std::make_unique<patching::TileLoader>(*p->slide, p->grid, lo);
  p->thumbnail_png = patching::tiling_thumbnail_png(*p->slide, p->tissue, p->grid);
  return p;
}

// A slide's tile embeddings on the host, row-major: what the features file is written from.
struct HostFeatures {
  int64_t n = 0, dim = 0;
  std::vector<float> values;
};

// The rest of a slide after its tiles: the slide's embedding (mean, aggregator or slide encoder), thumbnail,
// report and features file, written last since it marks the slide done.
nlohmann::json finish_slide(const std::string& path, const std::string& h5, const std::string& name, const EmbedArgs& a,
                            Encoder& enc, const PreparedSlide& prepared, HostFeatures host) {
  // Not the thread the tiles ran on: the device is set here for the pooling models.
  const c10::DeviceGuard on_device(enc.device);
  const fs::path out(a.out_dir);
  nlohmann::json r = {{"slide", path}, {"name", name}, {"features", h5}};
  const io::Slide& slide = *prepared.slide;
  const auto& tissue = prepared.tissue;
  const auto& grid = prepared.grid;
  const double target_mpp = prepared.target_mpp;
  io::PatchFeatures pf;
  pf.n = host.n;
  pf.dim = host.dim;
  for (const auto& c : grid.coords) pf.coords.insert(pf.coords.end(), {c[0], c[1]});
  pf.features = std::move(host.values);
  const torch::Tensor features = torch::from_blob(pf.features.data(), {pf.n, pf.dim}, torch::kFloat);  // a view of them
  pf.patch_size = grid.tile_size;
  pf.patch_size_level0 = grid.tile_size_level0;
  pf.level0_width = slide.info().levels[0].width;
  pf.level0_height = slide.info().levels[0].height;
  pf.target_mpp = target_mpp;
  pf.level0_mpp = slide.info().mpp_x;
  pf.encoder = enc.name;
  pf.name = name;

  torch::Tensor embedding;
  std::string pooling = "mean of tile features";
  std::optional<report::TileScores> heat;
  torch::Tensor slide_logits;  // a slide classifier's (pooled head) output
  if (enc.aggregator) {
    torch::NoGradGuard ng;
    auto pos = patching::grid_positions(grid.coords, grid.tile_size_level0);
    const models::AggregatorOutput agg = enc.aggregator->forward(features.to(enc.device), pos.to(enc.device));
    embedding = agg.pooled[0].to(torch::kCPU);
    pooling = "long-sequence aggregator";
    if (agg.logits.defined() && enc.aggregator->config().pooled_head) slide_logits = agg.logits[0].to(torch::kCPU).to(torch::kFloat).contiguous();
    if (!a.report.empty() && agg.logits.defined()) heat = tile_scores(*enc.aggregator, agg);
  } else if (enc.slide_encoder) {
    const int64_t in = enc.slide_encoder->config().in_chans;
    if (features.size(1) != in)
      throw std::runtime_error(path + ": the slide encoder takes " + std::to_string(in) + "-d tile features, the tile encoder gives " +
                               std::to_string(features.size(1)));
    torch::NoGradGuard ng;
    auto coords = torch::empty({1, pf.n, 2}, torch::kFloat);
    for (int64_t i = 0; i < pf.n; ++i) {
      coords[0][i][0] = static_cast<float>(grid.coords[i][0]);
      coords[0][i][1] = static_cast<float>(grid.coords[i][1]);
    }
    embedding = enc.slide_encoder->forward(features.unsqueeze(0).to(enc.device), coords.to(enc.device))[0][0].to(torch::kCPU);
    pooling = "LongNetViT slide encoder (" + fs::path(a.slide_encoder).stem().string() + ")";
  } else {
    embedding = features.mean(0);
  }
  // Thumbnail and embedding first, features last: the features file is what marks a slide done.
  fs::create_directories(out / "thumbnails");
  fs::create_directories(out / "slide_embeddings");
  io::write_file_atomically((out / "thumbnails" / (name + ".png")).string(), prepared.thumbnail_png);
  nlohmann::json ej = {{"slide", path}, {"encoder", enc.name}, {"pooling", pooling}, {"tiles", pf.n},
                       {"embedding", std::vector<float>(embedding.data_ptr<float>(), embedding.data_ptr<float>() + embedding.numel())}};
  if (slide_logits.defined())
    ej["logits"] = std::vector<float>(slide_logits.data_ptr<float>(), slide_logits.data_ptr<float>() + slide_logits.numel());
  io::write_file_atomically((out / "slide_embeddings" / (name + ".json")).string(), ej.dump() + "\n");
  if (!a.report.empty())
    report::write_wsi_report(a.report, slide, tissue, grid, heat, {{"pooling", pooling}, {"tissue_fraction", tissue.tissue_fraction()}},
                             a.quiet);
  try {
    io::write_patch_features(h5, pf);
  } catch (...) {
    if (!a.report.empty()) report::remove_report(a.report);
    throw;
  }
  r["tiles"] = pf.n;
  r["dim"] = pf.dim;
  r["tissue_fraction"] = tissue.tissue_fraction();
  return r;
}

// The slide's tiles through the tile encoder: the device part of a slide. `pending`: the slide being prepared
// (prepare_slide); its errors surface here. Returns the rest (pooling, outputs: finish_slide), which runs while
// the next slide is on the encoder.
batch::Job::Finish embed_tiles(const std::string& path, const std::string& h5, const EmbedArgs& a, Encoder& enc,
                               std::future<std::shared_ptr<PreparedSlide>> pending) {
  const std::string name = fs::path(path).stem().string();
  const std::shared_ptr<PreparedSlide> prepared = pending.get();
  const auto& grid = prepared->grid;
  patching::TileLoader& loader = *prepared->loader;
  const auto& pre = enc.vit->config().preprocess;
  std::array<float, 3> mean, std;
  for (int c = 0; c < 3; ++c) mean[c] = static_cast<float>(pre.mean[c]), std[c] = static_cast<float>(pre.std[c]);
  const auto t0 = std::chrono::steady_clock::now();
  Progress bar(name, static_cast<int64_t>(grid.coords.size()), a.quiet);
  std::vector<torch::Tensor> feats;  // on the device until the slide is done: no wait for the GPU per batch
  patching::TileBatch batch;
  int64_t done = 0;
  {
    torch::NoGradGuard ng;
    while (loader.next(batch)) {
      // Copied beside the previous batch's forward, normalised on the compute stream.
      const torch::Tensor images = torch_ops::to_device_beside_compute(batch.images, enc.device);
      const torch::Tensor x = patching::normalise_tiles(images, mean, std, enc.dtype);
      feats.push_back(own_storage(enc.vit->forward_embedding(x)));
      done += batch.images.size(0);
      bar.update(done);
    }
  }
  bar.finish();
  // Waits for the GPU, whose next work (the next slide's first tiles) is already read. Made float there, then one
  // copy to the host, into the buffer the features file is written from.
  const torch::Tensor all = torch::cat(feats, 0).to(torch::kFloat);
  feats.clear();
  HostFeatures host{all.size(0), all.size(1), std::vector<float>(static_cast<std::size_t>(all.numel()))};
  torch::from_blob(host.values.data(), all.sizes(), torch::kFloat).copy_(all);
  prepared->loader.reset();  // its reader threads and pinned buffers go before the rest runs beside the next slide
  const double encode_s = seconds_since(t0);
  return [path, h5, name, &a, &enc, prepared, host = std::move(host), encode_s]() mutable {
    const auto t1 = std::chrono::steady_clock::now();
    nlohmann::json r = finish_slide(path, h5, name, a, enc, *prepared, std::move(host));
    r["encode_seconds"] = encode_s;
    r["rest_seconds"] = seconds_since(t1);
    return r;
  };
}

}  // namespace

void add_embed_wsi(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<EmbedArgs>();
  auto* cmd = app.add_subcommand("embed-wsi", "Tile whole-slide images and embed them (Trident/CLAM HDF5 features)");
  cmd->add_option("slides", a->slides, "Slide files (any format OpenSlide reads)");
  cmd->add_option("-o,--out", a->out_dir, "Output folder")->required();
  cmd->add_option("--model", a->model, "Tile encoder config (configs/vit_*.yaml)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--weights", a->weights,
                  "Encoder weights: safetensors file(s) or a PyTorch .pt/.pth/.bin, with the key names of the config's reference "
                  "(timm, or Hugging Face Dinov2Model for reference: hf_dinov2)")
      ->required()
      ->check(CLI::ExistingFile);
  auto* prefix_opt = cmd->add_option("--weights-prefix", a->weights_prefix,
                                     "Key prefix to strip from the weights (default: weights. where the file's keys have it)");
  cmd->add_option("--aggregator-weights", a->aggregator_weights, "Slide aggregator (safetensors with its config in the metadata)")
      ->check(CLI::ExistingFile);
  auto* slide_enc = cmd->add_option("--slide-encoder", a->slide_encoder, "Slide encoder config (configs/gigapath_slide_*.yaml)")
                        ->check(CLI::ExistingFile);
  auto* slide_w = cmd->add_option("--slide-weights", a->slide_weights,
                                  "Slide encoder weights: GigaPath's slide_encoder.pth or safetensors, original key names")
                      ->check(CLI::ExistingFile);
  slide_enc->needs(slide_w);
  slide_w->needs(slide_enc);
  slide_enc->excludes("--aggregator-weights");
  cmd->add_option("--slide-weights-prefix", a->slide_weights_prefix, "Key prefix to strip from the slide encoder weights");
  cmd->add_option("--target-mpp", a->target_mpp, "Microns per pixel of the tiles (default: the config's preprocess.target_mpp)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--tile-size", a->tile_size, "Tile side in pixels (default: the config's preprocess.tile_size, else img_size)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--min-tissue", a->min_tissue, "Least tissue fraction of a kept tile")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--fallback-mpp", a->fallback_mpp, "Level-0 µm/px for slides that do not say");
  cmd->add_option("--batch", a->batch, "Tiles per encoder batch")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--threads", a->threads, "Tile reader threads (default: one per core)")->check(CLI::PositiveNumber);
  add_compute_options(cmd, a->compute, "fp32, bf16 or fp16: the tile encoder's weights and activations; features are written as fp32 "
                                       "(default: fp32)");
  report::add_option(cmd, a->report,
                     "the slide in OpenSeadragon (a Deep Zoom pyramid in PAGE_files/), tissue contour, tiles, and a heat map "
                     "of per-tile scores with an aggregator that has a head");
  batch::add_options(cmd, a->batch_opts, "slide (header 'slide', optional column fallback_mpp)");
  add_worker_options(cmd, a->workers);
  cmd->add_flag("--json", a->json, "Print a JSON summary on stdout");
  cmd->add_flag("-q,--quiet", a->quiet, "No progress bars");
  cmd->footer(
      "Examples:\n"
      "  tessera embed-wsi slide.svs -o out/ --model configs/vit_b16.yaml --weights vit_b16.safetensors\n"
      "  tessera embed-wsi slide.svs -o out/ --model TILE.yaml --weights TILE.safetensors \\\n"
      "      --slide-encoder configs/gigapath_slide_enc12l768d.yaml --slide-weights slide_encoder.pth\n"
      "    (a slide encoder needs tile features of its in_chans: 1536 for GigaPath's, from its ViT-g/14 tile encoder)\n"
      "  tessera embed-wsi slide.svs -o out/ --model configs/virchow2.yaml --weights pytorch_model.bin\n"
      "    (pathology encoders as downloaded: configs/uni.yaml, uni2_h, virchow2, h_optimus_0, gigapath_tile, phikon_v2)\n"
      "  tessera embed-wsi --manifest cohort.csv --shard 0/4 -o out/ --model configs/uni.yaml --weights pytorch_model.bin\n"
      "  tessera embed-wsi --manifest cohort.csv --gpus 0,1,2,3 -o out/ --model configs/uni.yaml --weights pytorch_model.bin\n"
      "    (one worker process per GPU over the whole manifest; the lock files share the slides out)\n"
      "A slide whose DIR/features/<slide>.h5 exists is skipped; one with a live .h5.lock is being done by another worker;\n"
      "a lock whose holder is gone (dead pid on this host, or no heartbeat for --lock-stale s from another host) is taken over.\n"
      "With --manifest, each task writes DIR/summaries/embed-wsi-*.json; 'tessera collect DIR' merges them.");
  cmd->callback([a, prefix_opt, &exit_code] {
    a->weights_prefix_given = prefix_opt->count() > 0;
    const std::vector<std::string> devices = worker_devices(a->workers);
    if (!a->slides.empty() && !a->batch_opts.manifest.empty())
      throw CLI::ValidationError("slides", "give slide files or --manifest, not both");
    std::vector<batch::ManifestRow> rows;
    batch::Job job = batch::begin_job("embed-wsi", a->out_dir, a->batch_opts, a->quiet, &rows);
    for (const auto& s : a->slides) {
      batch::ManifestRow r;
      r.index = static_cast<int>(rows.size());
      r.input = s;
      rows.push_back(r);
    }
    if (rows.empty()) throw CLI::ValidationError("slides", "give slide files or --manifest");
    if (!a->report.empty() && (!a->batch_opts.manifest.empty() || a->slides.size() != 1))
      throw CLI::ValidationError("--report", "a report is for one slide: give exactly one slide, no --manifest");
    report::check_option(a->report);
    if (!devices.empty()) {
      exit_code = run_workers(devices, "slides", a->json);
      return;
    }
    const Compute compute = resolve_compute(a->compute, "fp32");
    const RunStats stats(compute.device, compute.precision);
    std::filesystem::create_directories(std::filesystem::path(a->out_dir) / "features");
    job.output_of = [a](const batch::ManifestRow& r) { return features_path(a->out_dir, r.input); };
    const auto cfg = std::make_shared<const models::ViTConfig>(models::load_vit_config(a->model));
    // The next slide is opened, its tissue found and its first tiles read while this one is on the model (and the
    // first while the weights load): at most the current slide's and the next one's tiles in memory.
    ReadAhead<std::shared_ptr<PreparedSlide>> ahead;
    // The preparation of a row's slide, to run now or on its own thread (throws on a bad fallback_mpp cell).
    const auto prepare_of = [a, cfg, cuda = compute.device.is_cuda()](const batch::ManifestRow& r) {
      const double fallback = batch::option_double(r, "fallback_mpp", a->fallback_mpp);
      return [input = r.input, fallback, a, cfg, cuda] { return prepare_slide(input, fallback, *a, *cfg, cuda); };
    };
    job.upcoming = [&ahead, prepare_of](const batch::ManifestRow& r) {
      try {
        ahead.start(r.input, prepare_of(r));
      } catch (const std::exception&) {  // its row fails when processed, with the column named
      }
    };
    std::unique_ptr<Encoder> enc;  // only when a slide needs it: a rerun over finished slides loads nothing
    double load_s = 0;              // its loading (weights read, moved to the device), for --json
    const auto load = [a, cfg, compute, &enc, &load_s] {
      const auto t0 = std::chrono::steady_clock::now();
      enc = std::make_unique<Encoder>(load_encoder(*a, *cfg, compute));
      load_s = seconds_since(t0);
    };
    if (const batch::ManifestRow* first = batch::next_pending(job, rows, 0)) {
      job.upcoming(*first);
      load();
    }
    job.stage = [a, &enc, load, &ahead, prepare_of](const batch::ManifestRow& r, const std::string& h5) {
      if (!enc) {
        batch::option_double(r, "fallback_mpp", a->fallback_mpp);  // a bad cell fails its row before the encoder loads
        load();
      }
      return embed_tiles(r.input, h5, *a, *enc, ahead.take(r.input, prepare_of(r)));
    };
    const batch::Result res = batch::run(job, rows);
    if (a->json) {
      double tiles = 0;  // embedded in this run (skipped slides count none)
      for (const auto& r : res.items)
        if (r.contains("tiles")) tiles += r["tiles"].get<double>();
      nlohmann::json out = {{"slides", res.items}, {"done", res.done}, {"skipped", res.skipped}, {"failed", res.failed},
                            {"shard", {{"index", job.shard.index}, {"count", job.shard.count}, {"source", job.shard.source}}},
                            {"run", stats.json("tiles", tiles)}};
      out["run"]["load_encoder_seconds"] = load_s;
      if (enc)  // the file read beside the model built and its first batch run, then the copy into the model
        out["run"]["load_encoder_parts"] = {{"read_seconds", enc->read_seconds},
                                            {"build_and_first_batch_seconds", enc->build_seconds},
                                            {"first_batch_seconds", enc->first_batch_seconds},
                                            {"apply_seconds", enc->apply_seconds}};
      if (!res.summary_path.empty()) out["summary"] = res.summary_path;
      std::cout << out.dump(2) << "\n";
    }
    exit_code = res.failed ? kFailure : kOk;
  });
}

}  // namespace tessera::apps
