#include "metrics_log.h"

#include <cmath>
#include <cstdio>
#include <fstream>

#include "tessera/io/atomic_file.h"

namespace tessera::train {

MetricsLog::MetricsLog(std::string path, const std::string& loss_a, const std::string& loss_b,
                       std::vector<std::string> val_columns)
    : path_(std::move(path)), val_columns_(val_columns.size()) {
  header_ = "step,lr,loss," + loss_a + "," + loss_b + ",grad_norm,loss_scale,skipped,seconds";
  for (const auto& c : val_columns) header_ += "," + c;
}

void MetricsLog::keep_earlier(long long step) {
  std::ifstream in(path_);
  std::string line;
  if (!std::getline(in, line) || line != header_) return;
  while (std::getline(in, line))
    if (!line.empty() && std::stoll(line.substr(0, line.find(','))) <= step) rows_.push_back(line);
}

void MetricsLog::add(const StepRow& r) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%lld,%.6g,%.6f,%.6f,%.6f,%.6g,%.6g,%d,%.3f", r.step, r.lr, r.loss, r.loss_a, r.loss_b,
                r.grad_norm, r.loss_scale, r.skipped ? 1 : 0, r.seconds);
  rows_.push_back(std::string(buf) + std::string(val_columns_, ','));
}

void MetricsLog::add_validation(const std::vector<double>& values) {
  std::string& row = rows_.back();
  row.resize(row.size() - val_columns_);
  for (size_t i = 0; i < val_columns_; ++i) {
    row += ",";
    if (i < values.size() && !std::isnan(values[i])) {
      char b[32];
      std::snprintf(b, sizeof b, "%.5f", values[i]);
      row += b;
    }
  }
}

void MetricsLog::flush() const {
  std::string text = header_ + "\n";
  for (const auto& r : rows_) text += r + "\n";
  io::write_file_atomically(path_, text);
}

}  // namespace tessera::train
