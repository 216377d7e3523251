// `tessera bench`: Tessera's attention, and the models built on it, against
// LibTorch's own attention in one table: attention forward and forward +
// backward over a few sequence lengths (TFLOP/s by FlashAttention's count),
// then model throughput with either attention backend. The cases and the
// timing are tessera_bench's (bench/), shared with bench_models and
// bench_attention_cpu. A benchmark reports numbers; it checks none of them.
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>
#include <torch/cuda.h>
#include <torch/version.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>

#include "commands.h"
#include "compute_options.h"
#include "progress.h"
#include "tessera/bench/attention_cases.h"
#include "tessera/bench/model_cases.h"

namespace tessera::apps {

namespace {

namespace tb = tessera::bench;
using json = nlohmann::ordered_json;

struct Args {
  ComputeOptions compute;
  std::string only;
  std::vector<int64_t> seqs;
  int64_t heads = 0, head_dim = 64, batch = 1;
  int reps = 0;
  bool causal = false, quick = false, json = false, quiet = false;
};

// One line of the table: Tessera against LibTorch on one case and pass.
struct Row {
  std::string name, pass, unit, libtorch;  // libtorch: which LibTorch path ran ("SDPA", "naive")
  double tessera_ms = 0, tessera_rate = 0;
  std::optional<double> libtorch_ms, libtorch_rate, rel_diff;
  std::string note;  // why LibTorch's side did not run
  json detail;       // the case's own fields (shape or batch)
};

// Fills in what the user left to the device: CPU sizes run in seconds on a few cores.
void resolve_defaults(Args& a, bool cuda) {
  if (a.seqs.empty())
    a.seqs = cuda ? (a.quick ? std::vector<int64_t>{4096} : std::vector<int64_t>{4096, 16384})
                  : (a.quick ? std::vector<int64_t>{512, 1024} : std::vector<int64_t>{1024, 2048, 4096});
  if (a.heads == 0) a.heads = cuda ? 16 : 4;
  if (a.reps == 0) a.reps = cuda ? (a.quick ? 5 : 10) : (a.quick ? 2 : 3);
}

std::optional<double> rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  if (!a.defined() || !b.defined()) return std::nullopt;
  const auto af = a.to(torch::kFloat), bf = b.to(torch::kFloat);
  return ((af - bf).norm() / bf.norm()).item<double>();
}

// LibTorch's naive attention holds ~2 (forward) or ~5 (forward + backward)
// B·H·N² score matrices; past half the machine's memory it is not run.
std::string naive_too_big(const tb::AttentionShape& s, tb::Pass pass, c10::ScalarType dtype) {
  const double bytes = (pass == tb::Pass::forward ? 2.0 : 5.0) * double(s.batch) * double(s.heads) * double(s.seq) *
                       double(s.seq) * double(c10::elementSize(dtype));
  const double ram = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  if (bytes < ram / 2) return "";
  std::ostringstream o;
  o.precision(1);
  o << std::fixed << "skipped: needs ~" << bytes / double(1 << 30) << " GiB";
  return o.str();
}

void attention_rows(const Args& a, const tb::TimingOptions& timing, c10::ScalarType dtype, Progress& progress,
                    std::vector<Row>& rows) {
  const std::string libtorch = tb::libtorch_attention_name(timing.device);
  for (const int64_t n : a.seqs) {
    const tb::AttentionShape shape{a.batch, a.heads, n, a.head_dim, a.causal};
    const auto in = tb::make_attention_inputs(shape, timing.device, dtype);
    for (const auto pass : {tb::Pass::forward, tb::Pass::forward_backward}) {
      const bool fwd = pass == tb::Pass::forward;
      const double tflop = tb::attention_flops(shape, tb::pass_flop_factor(pass)) / 1e12;
      Row r;
      r.name = "B" + std::to_string(a.batch) + " H" + std::to_string(a.heads) + " N" + std::to_string(n) + " d" +
               std::to_string(a.head_dim) + (a.causal ? " causal" : "");
      r.pass = fwd ? "fwd" : "fwd+bwd";
      r.unit = "TFLOP/s";
      r.libtorch = libtorch;
      r.detail = {{"batch", a.batch}, {"heads", a.heads}, {"seq", n}, {"head_dim", a.head_dim}, {"causal", a.causal}};
      torch::Tensor out_t, out_l;
      r.tessera_ms = tb::time_attention(tb::AttentionImpl::tessera, in, pass, timing, fwd ? &out_t : nullptr);
      r.tessera_rate = tflop / (r.tessera_ms / 1e3);
      if (libtorch == "naive") r.note = naive_too_big(shape, pass, dtype);
      if (r.note.empty()) {
        r.libtorch_ms = tb::time_attention(tb::AttentionImpl::libtorch, in, pass, timing, fwd ? &out_l : nullptr);
        r.libtorch_rate = tflop / (*r.libtorch_ms / 1e3);
        if (fwd) r.rel_diff = rel_diff(out_t, out_l);
      }
      rows.push_back(r);
      progress.update(int64_t(rows.size()));
    }
  }
}

void model_rows(const std::vector<tb::ModelCase>& cases, const tb::TimingOptions& timing, Progress& progress,
                size_t done_before, std::vector<Row>& rows) {
  for (const auto& c : cases) {
    const auto t = tb::time_model(c, timing);
    Row r;
    r.name = c.name;
    r.pass = "fwd";
    r.unit = c.unit;
    r.libtorch = "SDPA";
    r.detail = {{"items", c.items}};
    r.tessera_ms = t.tessera_ms;
    r.tessera_rate = double(c.items) / (t.tessera_ms / 1e3);
    if (t.sdpa_ms) {
      r.libtorch_ms = t.sdpa_ms;
      r.libtorch_rate = double(c.items) / (*t.sdpa_ms / 1e3);
      r.rel_diff = t.rel_diff;
    } else {
      r.note = "LibTorch " TORCH_VERSION " has no SDPA (2.0+)";
    }
    rows.push_back(r);
    progress.update(int64_t(done_before + rows.size()));
  }
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
std::string rate(double v) { return v >= 1000 ? fmt("%.0f", v) : fmt("%.3g", v); }

void print_markdown(const json& head, const std::vector<std::pair<std::string, Row>>& rows) {
  std::cout << "tessera bench: " << head["device"].get<std::string>() << ", " << head["precision"].get<std::string>()
            << ", " << head["threads"].get<int>() << " CPU threads, LibTorch " << head["libtorch"].get<std::string>()
            << "; attention TFLOP/s by FlashAttention's count (4·B·H·N²·d, /2 causal, fwd+bwd ×3.5)\n\n"
            << "| kind | case | pass | Tessera ms | Tessera rate | LibTorch | LibTorch ms | LibTorch rate | "
               "LibTorch/Tessera time | outputs rel diff |\n"
            << "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& [kind, r] : rows) {
    std::cout << "| " << kind << " | " << r.name << " | " << r.pass << " | " << fmt("%.2f", r.tessera_ms) << " | "
              << rate(r.tessera_rate) << " " << r.unit << " | " << r.libtorch << " | ";
    if (r.libtorch_ms)
      std::cout << fmt("%.2f", *r.libtorch_ms) << " | " << rate(*r.libtorch_rate) << " " << r.unit << " | "
                << fmt("%.2fx", *r.libtorch_ms / r.tessera_ms);
    else
      std::cout << r.note << " | | ";
    std::cout << " | " << (r.rel_diff ? fmt("%.1e", *r.rel_diff) : "") << " |\n";
  }
}

json row_json(const Row& r) {
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  json j{{"case", r.name}, {"pass", r.pass}};
  j.update(r.detail);
  j.update(json{{"unit", r.unit},
                {"tessera_ms", r.tessera_ms},
                {"tessera_rate", r.tessera_rate},
                {"libtorch", r.libtorch},
                {"libtorch_ms", opt(r.libtorch_ms)},
                {"libtorch_rate", opt(r.libtorch_rate)},
                {"libtorch_over_tessera", r.libtorch_ms ? json(*r.libtorch_ms / r.tessera_ms) : json(nullptr)},
                {"rel_diff", opt(r.rel_diff)}});
  if (!r.note.empty()) j["note"] = r.note;
  return j;
}

void run(Args a) {
  const bool cuda = parse_device(a.compute.device).value_or(torch::kCPU).is_cuda();
  resolve_defaults(a, cuda);
  const Compute compute = resolve_compute(a.compute, cuda ? "bf16" : "fp32");
  const auto dtype = compute.dtype;
  const tb::TimingOptions timing{a.reps, cuda ? 2 : 1, compute.device};
  const bool do_attention = a.only != "models", do_models = a.only != "attention";

  std::vector<tb::ModelCase> cases;
  if (do_models) cases = tb::make_model_cases(timing.device, dtype, a.quick);
  Progress progress("bench", int64_t((do_attention ? 2 * a.seqs.size() : 0) + cases.size()), a.quiet);
  std::vector<Row> att, mod;
  if (do_attention) attention_rows(a, timing, dtype, progress, att);
  model_rows(cases, timing, progress, att.size(), mod);
  progress.finish();

  json head{{"device", a.compute.device},
            {"precision", compute.precision},
            {"threads", at::get_num_threads()},
            {"libtorch", TORCH_VERSION},
            {"quick", a.quick},
            {"reps", a.reps}};
  if (a.json) {
    json j = head;
    j["attention"] = json::array();
    j["models"] = json::array();
    for (const auto& r : att) j["attention"].push_back(row_json(r));
    for (const auto& r : mod) j["models"].push_back(row_json(r));
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::vector<std::pair<std::string, Row>> all;
  for (const auto& r : att) all.emplace_back("attention", r);
  for (const auto& r : mod) all.emplace_back("model", r);
  print_markdown(head, all);
}

}  // namespace

void add_bench(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("bench", "Time Tessera's attention and models against LibTorch's attention");
  add_compute_options(cmd, a->compute, "fp32, bf16 or fp16 (default: fp32 on cpu, bf16 on cuda)");
  cmd->add_option("--seq", a->seqs, "Attention sequence lengths (default cpu: 1024 2048 4096, cuda: 4096 16384)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--heads", a->heads, "Attention heads (default cpu: 4, cuda: 16)")->check(CLI::PositiveNumber);
  cmd->add_option("--head-dim", a->head_dim, "Attention head dim")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--batch", a->batch, "Attention batch")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_flag("--causal", a->causal, "Causal attention (FLOPs halved)");
  cmd->add_option("--only", a->only, "Run only one part: attention or models")
      ->check(CLI::IsMember({"attention", "models"}));
  cmd->add_option("--reps", a->reps, "Timed runs per measurement, median reported (default cpu: 3, cuda: 10)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--quick", a->quick, "Fewer lengths, smaller models, fewer runs (seconds on a laptop CPU)");
  cmd->add_flag("--json", a->json, "Print one JSON object instead of the table");
  cmd->add_flag("-q,--quiet", a->quiet, "No progress bar");
  cmd->footer(
      "LibTorch's side: at::scaled_dot_product_attention on cuda (LibTorch >= 2.0), the naive\n"
      "softmax(Q K^T) V on cpu; models switch their attention backend to SDPA (LibTorch >= 2.0).\n"
      "Examples:\n"
      "  tessera bench --quick                               a minute or less on a CPU\n"
      "  tessera bench --only attention --seq 1024 4096 --causal\n"
      "  tessera bench --device cuda --precision bf16 --json > bench.json");
  cmd->callback([a, &exit_code] {
    run(*a);
    exit_code = kOk;
  });
}

}  // namespace tessera::apps
