#include "progress.h"

#include <unistd.h>

#include <cstdio>

namespace tessera::apps {

Progress::Progress(std::string label, int64_t total, bool quiet)
    : label_(std::move(label)), total_(total), quiet_(quiet), tty_(::isatty(2) != 0) {
  start_ = last_ = std::chrono::steady_clock::now();
}

Progress::~Progress() { finish(); }

void Progress::update(int64_t done) {
  done_ = done;
  const auto now = std::chrono::steady_clock::now();
  if (tty_ && now - last_ > std::chrono::milliseconds(100)) {
    last_ = now;
    draw(false);
  }
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  draw(true);
}

void Progress::draw(bool final_line) {
  if (quiet_ || (!tty_ && !final_line)) return;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double frac = total_ > 0 ? double(done_) / double(total_) : 1.0;
  constexpr int kWidth = 30;
  std::string bar(kWidth, ' ');
  for (int i = 0; i < int(frac * kWidth + 0.5) && i < kWidth; ++i) bar[i] = '#';
  std::fprintf(stderr, "%s%-18s [%s] %lld/%lld  %.1f s%s", tty_ ? "\r" : "", label_.c_str(), bar.c_str(),
               static_cast<long long>(done_), static_cast<long long>(total_), secs, final_line ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace tessera::apps
