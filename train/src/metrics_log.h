// metrics.csv of a training run: one row per step (loss terms, learning rate,
// gradient norm, loss scale, time), validation columns filled on the steps
// that validated. Rewritten atomically at each checkpoint; on resume the
// earlier run's rows up to the checkpoint are kept.
#pragma once

#include <string>
#include <vector>

namespace tessera::train {

struct StepRow {
  long long step = 0;
  double lr = 0, loss = 0, loss_a = 0, loss_b = 0, grad_norm = 0, loss_scale = 1, seconds = 0;
  bool skipped = false;
};

class MetricsLog {
 public:
  // loss_a / loss_b name the two loss terms (dice_loss, ce_loss ...); val_columns the validation values.
  MetricsLog(std::string path, const std::string& loss_a, const std::string& loss_b, std::vector<std::string> val_columns);
  void keep_earlier(long long step);
  void add(const StepRow& r);
  void add_validation(const std::vector<double>& values);  // for the last row; NaN = empty cell
  void flush() const;

 private:
  std::string path_, header_;
  size_t val_columns_;
  std::vector<std::string> rows_;
};

}  // namespace tessera::train
