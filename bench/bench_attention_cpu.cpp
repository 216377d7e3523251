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

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "tessera/io/atomic_file.h"
#include "tessera/torch/attention.h"

namespace {

using Clock = std::chrono::steady_clock;

double peak_rss_mib() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return double(r.ru_maxrss) / 1024.0;
}

struct Measure {
  double fwd_ms = 0, bwd_ms = 0, base_mib = 0, peak_mib = 0;
};

// Median of `reps` timings of f().
template <typename F>
double median_ms(int reps, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = Clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Median time of out.backward(g) alone (the forward that builds the graph is not timed).
template <typename F>
double backward_ms(int reps, F&& forward, const torch::Tensor& g) {
  std::vector<double> t;
  for (int i = 0; i <= reps; ++i) {
    auto out = forward();
    const auto a = Clock::now();
    out.backward(g);
    if (i > 0) t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());  // i = 0 warms up
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

Measure run_one(const std::string& impl, int64_t n, int64_t h, int64_t d, bool backward, int reps) {
  torch::manual_seed(0);
  auto q = torch::randn({1, n, h, d}), k = torch::randn({1, n, h, d}), v = torch::randn({1, n, h, d});
  auto g = torch::randn({1, n, h, d});
  Measure m;
  m.base_mib = peak_rss_mib();
  const double scale = 1.0 / std::sqrt(double(d));
  if (impl == "tessera") {
    tessera::torch_ops::AttentionOptions o;
    torch::NoGradGuard ng;
    auto fwd = [&] { return tessera::torch_ops::attention(q, k, v, o); };
    fwd();  // warm-up
    m.fwd_ms = median_ms(reps, fwd);
    if (backward) {
      torch::AutoGradMode grad_on(true);
      auto qg = q.clone().requires_grad_(true), kg = k.clone().requires_grad_(true), vg = v.clone().requires_grad_(true);
      m.bwd_ms = backward_ms(reps, [&] { return std::get<0>(tessera::torch_ops::attention(qg, kg, vg)); }, g);
    }
  } else {
    auto naive_fwd = [&](const torch::Tensor& qq, const torch::Tensor& kk, const torch::Tensor& vv) {
      auto qt = qq.transpose(1, 2), kt = kk.transpose(1, 2), vt = vv.transpose(1, 2);
      auto s = torch::matmul(qt, kt.transpose(-1, -2)) * scale;
      return torch::matmul(torch::softmax(s, -1), vt).transpose(1, 2);
    };
    {
      torch::NoGradGuard ng;
      naive_fwd(q, k, v);
      m.fwd_ms = median_ms(reps, [&] { return naive_fwd(q, k, v); });
    }
    if (backward) {
      auto qg = q.clone().requires_grad_(true), kg = k.clone().requires_grad_(true), vg = v.clone().requires_grad_(true);
      m.bwd_ms = backward_ms(reps, [&] { return naive_fwd(qg, kg, vg); }, g);
    }
  }
  m.peak_mib = peak_rss_mib();
  return m;
}

double gflops(int64_t n, int64_t h, int64_t d, double ms, double mult) {
  return ms > 0 ? mult * 4.0 * double(n) * double(n) * double(h) * double(d) / (ms * 1e6) : 0.0;
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
