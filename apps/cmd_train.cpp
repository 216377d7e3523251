// `tessera train --config configs/train_*.yaml -o DIR`: Swin UNETR
// segmentation training (train/seg_trainer.h) with a progress bar, a line per
// validation, and a resumable checkpoint in DIR.
#include <nlohmann/json.hpp>

#include <cmath>
#include <iostream>
#include <memory>

#include "commands.h"
#include "compute_options.h"
#include "progress.h"
#include "tessera/train/cls_trainer.h"
#include "tessera/train/seg_trainer.h"
#include "tessera/train/train_config.h"

namespace tessera::apps {
namespace {

struct TrainArgs {
  std::string config, out, resume, attention = "tessera", weights_dtype = "fp32";
  ComputeOptions compute;
  int64_t steps = -1, stop_after = -1, checkpoint_every = 0;
  bool no_validation = false, json = false, quiet = false;
};

}  // namespace

void add_train(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand("train", "Train a Swin UNETR segmentation model or an aggregator classifier over feature files");
  cmd->add_option("-c,--config", a->config, "Training config (configs/train_*.yaml)")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--out", a->out, "Output folder: checkpoint.safetensors, model.safetensors, metrics.csv, summary.json")->required();
  cmd->add_option("--resume", a->resume, "Continue from this checkpoint (bit for bit on the CPU)")->check(CLI::ExistingFile);
  add_compute_options(cmd, a->compute, "fp32, bf16 or fp16: mixed precision over fp32 master weights (default: fp32)");
  cmd->add_option("--attention", a->attention, "tessera, torch_sdpa (LibTorch >= 2) or reference (float64, slow)")
      ->capture_default_str()->check(CLI::IsMember({"tessera", "torch_sdpa", "reference"}));
  cmd->add_option("--weights-dtype", a->weights_dtype, "Float type of model.safetensors (fp16/bf16 halve it, to ship)")
      ->capture_default_str()->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_option("--steps", a->steps, "Override optim.steps of the config")->check(CLI::PositiveNumber);
  cmd->add_option("--stop-after", a->stop_after, "Stop (with a checkpoint) after this many steps, to resume later")->check(CLI::PositiveNumber);
  cmd->add_option("--checkpoint-every", a->checkpoint_every, "Checkpoint every N steps (default: at each validation)")->check(CLI::PositiveNumber);
  cmd->add_flag("--no-validation", a->no_validation, "Skip validation (timing runs)");
  cmd->add_flag("--json", a->json, "Print the summary as JSON on stdout");
  cmd->add_flag("-q,--quiet", a->quiet, "No progress bar");
  cmd->footer(
      "Examples:\n"
      "  tessera train -c configs/train_phantom.yaml -o runs/phantom --device cuda --precision bf16\n"
      "  tessera train -c configs/train_phantom.yaml -o runs/phantom --resume runs/phantom/checkpoint.safetensors");
  cmd->callback([a, &exit_code] {
    train::TrainConfig cfg = train::load_train_config(a->config);
    if (a->steps > 0) {
      cfg.optim.steps = a->steps;
      cfg.optim.warmup_steps = std::min(cfg.optim.warmup_steps, cfg.optim.steps);
    }
    train::TrainOptions opt;
    opt.out_dir = a->out;
    const Compute compute = resolve_compute(a->compute, "fp32");
    opt.device = compute.device.str();
    opt.precision = compute.precision;
    opt.attention = a->attention;
    opt.resume = a->resume;
    opt.stop_after = a->stop_after;
    opt.checkpoint_every = a->checkpoint_every;
    opt.validate = !a->no_validation;
    opt.weights_dtype = a->weights_dtype;
    std::unique_ptr<Progress> bar;
    std::string phase;
    train::TrainCallbacks cb;
    cb.progress = [&](const std::string& what, int64_t done, int64_t total) {
      if (what == "val") return;  // validation is short; its result gets a line
      if (what != phase) {
        if (bar) bar->finish();
        bar = std::make_unique<Progress>(what, total, a->quiet);
        phase = what;
      }
      bar->update(done);
    };
    cb.on_validation = [&](const train::ValStats& v) {
      if (a->quiet || a->json) return;
      if (bar) bar->finish();
      bar.reset();
      phase.clear();
      std::cerr << "step " << v.step << ": validation mean " << v.metric << " " << v.mean;
      if (v.accuracy >= 0) std::cerr << ", accuracy " << v.accuracy;
      if (v.phases) std::cerr << ", phase Jaccard " << v.phases->jaccard.mean;
      std::cerr << " (";
      for (size_t k = 0; k < v.per_class.size(); ++k) std::cerr << (k ? " " : "") << v.names[k] << " " << v.per_class[k];
      std::cerr << ")\n";
    };
    const train::TrainResult r =
        cfg.task == "classification" ? train::train_classification(cfg, opt, cb) : train::train_segmentation(cfg, opt, cb);
    if (bar) bar->finish();
    nlohmann::json j = {{"steps_done", r.steps_done}, {"steps", cfg.optim.steps}, {"seconds", r.seconds},
                        {"final_loss", r.last_step.loss}, {"checkpoint", r.checkpoint}, {"metrics", r.metrics}};
    if (!r.weights.empty()) j["weights"] = r.weights;
    if (r.validated) j[r.last_val.metric == "Dice" ? "val_mean_dice" : "val_balanced_accuracy"] = r.last_val.mean;
    if (r.validated && r.last_val.phases) j["val_phase_jaccard"] = r.last_val.phases->jaccard.mean;
    if (a->json) std::cout << j.dump(2) << "\n";
    else if (!a->quiet) {
      std::cout << "trained " << r.steps_done << "/" << cfg.optim.steps << " steps in " << r.seconds << " s, loss "
                << r.last_step.loss;
      if (r.validated) std::cout << ", validation mean " << r.last_val.metric << " " << r.last_val.mean;
      std::cout << "\n" << (r.weights.empty() ? "checkpoint: " + r.checkpoint : "weights: " + r.weights) << "\n";
    }
    exit_code = kOk;
  });
}

}  // namespace tessera::apps
