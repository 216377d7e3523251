// The CUDA dispatch table of docs/attention.md, row by row, against the dispatch itself
// (cuda::choose: host logic, no GPU needed): the documented table is the behaviour.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/dispatch.h"
#include "tessera/attention/attention.h"
#include "tessera/attention/call_spec.h"

namespace ta = tessera::attention;
namespace tc = tessera::attention::cuda;

namespace {

struct Row {
  std::string line, pass, dtype, features, kernel;
  int head_dim = 0, nq = 0, nk = 0, arch = 0;
};

std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string c;
  std::getline(ss, c, '|');  // before the first bar
  while (std::getline(ss, c, '|')) {
    const size_t a = c.find_first_not_of(" `"), b = c.find_last_not_of(" `");
    out.push_back(a == std::string::npos ? "" : c.substr(a, b - a + 1));
  }
  return out;
}

// The rows between the table's markers; the header and separator lines are skipped.
std::vector<Row> table_rows() {
  const std::string path = std::string(TESSERA_DOCS_DIR) + "/attention.md";
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::vector<Row> rows;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.find("<!-- dispatch-table -->") != std::string::npos) inside = true;
    else if (line.find("<!-- /dispatch-table -->") != std::string::npos) inside = false;
    else if (inside && line.rfind("| ", 0) == 0 && line.rfind("| pass |", 0) != 0 && line.rfind("| ---", 0) != 0) {
      const std::vector<std::string> c = cells(line);
      if (c.size() < 8) throw std::runtime_error(path + ": a dispatch row with fewer than 8 cells: " + line);
      Row r;
      r.line = line;
      r.pass = c[0];
      r.dtype = c[1];
      r.head_dim = std::stoi(c[2]);
      const size_t x = c[3].find("x");
      r.nq = std::stoi(c[3].substr(0, x));
      r.nk = std::stoi(c[3].substr(x + 1));
      r.features = "," + c[4] + ",";
      r.arch = std::stoi(c[5]);
      r.kernel = c[6];
      rows.push_back(r);
    }
  }
  return rows;
}

// The row as a call (call_spec.h) and its overrides (the features that name an Overrides field).
ta::AttentionParams params_of(const Row& r, tc::Overrides& ov) {
  std::string spec = "dtype=" + r.dtype + " d=" + std::to_string(r.head_dim) + " nq=" + std::to_string(r.nq) +
                     " nk=" + std::to_string(r.nk);
  std::stringstream ss(r.features);
  for (std::string w; std::getline(ss, w, ',');) {
    if (w.empty() || w == "–") continue;
    const std::string name = w.substr(0, w.find('='));
    if (name == "portable" || name == "sm90_forward" || name == "sm90_backward" || name == "win_backward" ||
        name == "bwd_head_splits")
      tc::apply_override(ov, w);
    else
      spec += " " + w;
  }
  return ta::call_spec_params(spec);
}

tc::Pass pass_of(const Row& r) {
  if (r.pass == "forward") return tc::Pass::forward;
  if (r.pass == "backward") return tc::Pass::backward;
  if (r.pass == "dq") return tc::Pass::dq;
  if (r.pass == "dbias") return tc::Pass::dbias;
  throw std::runtime_error("dispatch table: unknown pass in " + r.line);
}

std::string shown(const tc::Choice& c) {
  std::string s = tc::kernel_name(c.kernel);
  if (c.kernel == tc::Kernel::portable || c.kernel == tc::Kernel::portable_lean || c.kernel == tc::Kernel::portable_win)
    s += std::string(" (") + tc::mods_name(c.mods) + ")";
  if (c.head_splits > 1) s += ", " + std::to_string(c.head_splits) + " head splits";
  return s;
}

}  // namespace

TEST(AttentionDispatch, DocumentedTable) {
  const std::vector<Row> rows = table_rows();
  ASSERT_GE(rows.size(), 40u) << "docs/attention.md: the dispatch table's markers or rows are missing";
  for (const Row& r : rows) {
    tc::Overrides ov;
    const ta::AttentionParams p = params_of(r, ov);
#if !defined(TESSERA_SM90A)
    if (r.kernel.rfind("sm90_", 0) == 0) continue;  // (a build without the sm_90a image has no Hopper kernels)
#endif
    EXPECT_EQ(shown(tc::choose(p, pass_of(r), ov, r.arch)), r.kernel) << r.line;
  }
}

TEST(AttentionDispatch, ExplainSaysWhy) {
  const std::string text = ta::explain_cuda_dispatch("dtype=bf16 d=16 nq=343 nk=343 bias_grad", {}, 90);
  EXPECT_NE(text.find("backward: portable_win"), std::string::npos) << text;
  EXPECT_NE(text.find("sm90: no, head dim outside 33..128"), std::string::npos) << text;
  EXPECT_NE(text.find("dq: none"), std::string::npos) << text;
}

TEST(AttentionDispatch, CallWordsAreChecked) {
  EXPECT_THROW(ta::call_spec_params("dtype=bf16 d=64 casual"), ta::Error);
  EXPECT_THROW(ta::call_spec_params("d=sixty"), ta::Error);
  EXPECT_THROW(ta::explain_cuda_dispatch("d=64", {"win=0"}), ta::Error);
}

TEST(AttentionDispatch, OverrideNamesAreChecked) {
  tc::Overrides ov;
  EXPECT_THROW(tc::apply_override(ov, "win=0"), std::invalid_argument);
  EXPECT_THROW(tc::apply_override(ov, "sm90_backward=persist"), std::invalid_argument);
  EXPECT_THROW(tc::apply_override(ov, "qsplit=two"), std::invalid_argument);
  tc::apply_override(ov, "sm90_backward=one_wg");
  EXPECT_EQ(ov.sm90_backward, tc::Overrides::Sm90Backward::one_wg);
  tc::apply_override(ov, "causal_chunk=4");
  EXPECT_EQ(ov.causal_chunk, 4);
}
