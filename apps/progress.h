// A one-line progress bar on stderr for long steps (tiles, windows, frames):
// redrawn in place at most ~10 times a second, silent with --quiet, and a
// plain final line when stderr is not a terminal (logs stay readable).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tessera::apps {

class Progress {
 public:
  Progress(std::string label, int64_t total, bool quiet);
  ~Progress();
  void update(int64_t done);
  void finish();

 private:
  void draw(bool final_line);
  std::string label_;
  int64_t total_, done_ = 0;
  bool quiet_, tty_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace tessera::apps
