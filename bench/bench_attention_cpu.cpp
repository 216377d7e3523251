// CPU attention benchmark: Tessera's tiled path vs LibTorch's naive
// matmul-softmax-matmul at the same thread count, forward and backward,
// time and peak memory.
//
//   bench_attention_cpu --all [--threads T] [--markdown FILE]
//       runs the whole grid, one child process per measurement so that each
//       peak-RSS figure belongs to that measurement alone;
//   bench_attention_cpu --impl tessera|torch --n N [--heads H] [--dim D] [--pass fwd|bwd]
//       one measurement, printed as one JSON line.
#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <sys/resource.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "tessera/bench/attention_cases.h"
#include "tessera/io/atomic_file.h"

namespace {

namespace tb = tessera::bench;

double peak_rss_mib() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return double(r.ru_maxrss) / 1024.0;
}

struct Measure {
  double fwd_ms = 0, bwd_ms = 0, base_mib = 0, peak_mib = 0;
};

// impl "torch" is LibTorch's naive attention here: the CPU has no SDPA kernel to compare with.
Measure run_one(const std::string& impl, int64_t n, int64_t h, int64_t d, bool backward, int reps) {
  const auto in = tb::make_attention_inputs(tb::AttentionShape{1, h, n, d}, c10::kCPU, c10::kFloat);
  const auto which = impl == "tessera" ? tb::AttentionImpl::tessera : tb::AttentionImpl::libtorch;
  const tb::TimingOptions timing{reps, 1, c10::kCPU};
  Measure m;
  m.base_mib = peak_rss_mib();
  m.fwd_ms = tb::time_attention(which, in, tb::Pass::forward, timing);
  if (backward) m.bwd_ms = tb::time_attention(which, in, tb::Pass::backward, timing);
  m.peak_mib = peak_rss_mib();
  return m;
}

double gflops(int64_t n, int64_t h, int64_t d, double ms, double mult) {
  return ms > 0 ? tb::attention_flops(tb::AttentionShape{1, h, n, d}, mult) / (ms * 1e6) : 0.0;
}

// Runs one measurement in a child process; returns its JSON line.
nlohmann::json child(const std::string& self, const std::string& impl, int64_t n, int64_t h, int64_t d, bool bwd,
                     int threads) {
  std::ostringstream cmd;
  cmd << self << " --impl " << impl << " --n " << n << " --heads " << h << " --dim " << d << " --pass "
      << (bwd ? "bwd" : "fwd") << " --threads " << threads;
  FILE* pipe = popen(cmd.str().c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot start " + cmd.str());
  std::string out;
  char buf[4096];
  while (fgets(buf, sizeof buf, pipe)) out += buf;
  const int rc = pclose(pipe);
  if (rc != 0) return {{"error", "exit status " + std::to_string(rc)}};
  return nlohmann::json::parse(out.substr(out.rfind('{')));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tessera CPU attention benchmark"};
  std::string impl = "tessera", pass = "fwd", markdown;
  int64_t n = 4096, heads = 4, dim = 64;
  int threads = 2;
  bool all = false;
  std::vector<int64_t> grid = {1024, 2048, 4096, 8192, 16384};
  int64_t memory_n = 65536;
  app.add_option("--impl", impl)->check(CLI::IsMember({"tessera", "torch"}));
  app.add_option("--n", n);
  app.add_option("--heads", heads);
  app.add_option("--dim", dim);
  app.add_option("--pass", pass)->check(CLI::IsMember({"fwd", "bwd"}));
  app.add_option("--threads", threads, "threads for both implementations");
  app.add_flag("--all", all, "run the whole grid, one process per measurement");
  app.add_option("--grid", grid, "sequence lengths of the grid");
  app.add_option("--memory-n", memory_n, "sequence length of the O(N)-memory run (tessera only, 1 head; 0 = skip)");
  app.add_option("--markdown", markdown, "write the table to this file");
  CLI11_PARSE(app, argc, argv);
  at::set_num_threads(threads);

  if (!all) {
    const int reps = n <= 2048 ? 5 : (n <= 4096 ? 3 : 1);
    const Measure m = run_one(impl, n, heads, dim, pass == "bwd", reps);
    nlohmann::json j{{"impl", impl}, {"n", n}, {"heads", heads}, {"dim", dim}, {"threads", threads},
                     {"fwd_ms", m.fwd_ms}, {"bwd_ms", m.bwd_ms}, {"peak_mib", m.peak_mib},
                     {"extra_mib", m.peak_mib - m.base_mib}};
    std::cout << j.dump() << std::endl;
    return 0;
  }

  const std::string self = "/proc/" + std::to_string(getpid()) + "/exe";
  std::ostringstream md;
  md << "| N | pass | tessera ms | GFLOP/s | peak extra MiB | LibTorch naive ms | GFLOP/s | peak extra MiB | speed-up |\n"
     << "|---|---|---|---|---|---|---|---|---|\n";
  for (int64_t nn : grid) {
    for (bool bwd : {false, true}) {
      // Naive attention needs ~5 N² floats per head forward+backward; skip what cannot fit in memory.
      const double naive_gib = (bwd ? 5.0 : 2.0) * double(nn) * nn * heads * 4 / (1 << 30);
      auto t = child(self, "tessera", nn, heads, dim, bwd, threads);
      nlohmann::json r = naive_gib < 14.0 ? child(self, "torch", nn, heads, dim, bwd, threads)
                                          : nlohmann::json{{"error", "skipped: needs ~" + std::to_string(int(naive_gib)) + " GiB"}};
      const char* key = bwd ? "bwd_ms" : "fwd_ms";
      const double mult = bwd ? 2.5 : 1.0;
      auto cell = [&](const nlohmann::json& j) {
        std::ostringstream c;
        if (j.contains("error")) c << j["error"].get<std::string>() << " | | ";
        else {
          c.setf(std::ios::fixed);
          c.precision(1);
          c << j[key].get<double>() << " | " << gflops(nn, heads, dim, j[key].get<double>(), mult) << " | "
            << j["extra_mib"].get<double>();
        }
        return c.str();
      };
      md << "| " << nn << " | " << (bwd ? "bwd" : "fwd") << " | " << cell(t) << " | " << cell(r) << " | ";
      if (!t.contains("error") && !r.contains("error"))
        md << std::fixed << std::setprecision(2) << r[key].get<double>() / t[key].get<double>() << "x";
      md << " |\n";
      std::cerr << "done N=" << nn << (bwd ? " bwd" : " fwd") << std::endl;
    }
  }
  if (memory_n > 0) {
    auto t = child(self, "tessera", memory_n, 1, dim, true, threads);
    md << "\nO(N) memory: tessera forward+backward at N = " << memory_n << ", 1 head, d = " << dim << ": ";
    if (t.contains("error")) md << t["error"].get<std::string>() << "\n";
    else
      md << std::fixed << std::setprecision(1) << "peak extra " << t["extra_mib"].get<double>() << " MiB over its inputs (an N×N fp32 score matrix alone would be "
         << double(memory_n) * memory_n * 4 / (1 << 30) << " GiB); forward " << t["fwd_ms"].get<double>() / 1000
         << " s, backward " << t["bwd_ms"].get<double>() / 1000 << " s\n";
  }
  std::cout << md.str();
  if (!markdown.empty()) tessera::io::write_file_atomically(markdown, md.str());
  return 0;
}
