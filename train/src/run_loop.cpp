#include "run_loop.h"

#include <torch/torch.h>

#include <chrono>
#include <filesystem>

#include "metrics_log.h"
#include "tessera/train/adamw.h"
#include "tessera/train/checkpoint.h"

namespace tessera::train {

TrainResult run_loop(const Loop& l, int64_t start) {
  namespace fs = std::filesystem;
  using Clock = std::chrono::steady_clock;
  const TrainConfig& cfg = l.cfg;
  TrainResult result;
  result.checkpoint = (fs::path(l.opt.out_dir) / "checkpoint.safetensors").string();
  result.metrics = (fs::path(l.opt.out_dir) / "metrics.csv").string();
  MetricsLog log(result.metrics, l.part_a, l.part_b, l.val_columns);
  if (start > 0) log.keep_earlier(start);
  auto save = [&](int64_t steps_done) {
    Checkpoint ck = l.state.checkpoint(steps_done, cfg.seed);
    ck.info = l.info;
    ck.info["config"] = cfg.path;
    ck.info["precision"] = l.opt.precision;
    save_checkpoint(result.checkpoint, ck);
    log.flush();
  };

  const int64_t end = l.opt.stop_after >= 0 ? std::min(cfg.optim.steps, l.opt.stop_after) : cfg.optim.steps;
  const int64_t val_every = cfg.validation.every;
  const int64_t ck_every = l.opt.checkpoint_every > 0 ? l.opt.checkpoint_every : val_every;
  l.net.train();
  for (int64_t step = start; step < end; ++step) {
    const auto t0 = Clock::now();
    StepStats st;
    st.step = step + 1;
    st.steps = cfg.optim.steps;
    st.lr = lr_at(cfg.optim, step);
    const StepLoss loss = l.loss(step);
    l.state.scale(loss.total).backward();
    st.loss = loss.total.item<double>();
    st.loss_a = loss.part_a;
    st.loss_b = loss.part_b;
    const Update u = l.state.step(st.lr, "step " + std::to_string(step + 1));
    st.grad_norm = u.grad_norm;
    st.skipped = u.skipped;
    st.loss_scale = l.state.loss_scale();
    st.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    log.add({st.step, st.lr, st.loss, loss.part_a, loss.part_b, st.grad_norm, st.loss_scale, st.seconds, st.skipped});
    result.last_step = st;
    if (l.cb.on_step) l.cb.on_step(st);
    if (l.cb.progress) l.cb.progress("train", step + 1, cfg.optim.steps);
    if (l.opt.validate && ((val_every > 0 && (step + 1) % val_every == 0) || step + 1 == cfg.optim.steps)) {
      l.net.eval();
      {
        torch::NoGradGuard ng;
        result.last_val = l.validate(step + 1);
      }
      result.validated = true;
      l.net.train();
      log.add_validation(l.val_cells(result.last_val));
      if (l.cb.on_validation) l.cb.on_validation(result.last_val);
    }
    if (step + 1 == end || (ck_every > 0 && (step + 1) % ck_every == 0)) save(step + 1);
  }
  if (start >= end) save(start);
  result.steps_done = std::max(start, end);
  return result;
}

}  // namespace tessera::train
