// `tessera collect DIR`: merges the per-task summaries that a batch run of
// `embed-wsi`, `segment` or `video` wrote under DIR/summaries/ into one table
// against the manifest: every row done, failed (with its error line) or
// missing. Exits 1 when anything failed or is missing, so a pipeline can
// gate on it.
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "batch.h"
#include "commands.h"

namespace tessera::apps {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct RowState {
  std::string input, status = "missing", detail, output;
  double last_failure = -1;
};

}  // namespace

void add_collect(CLI::App& app, int& exit_code) {
  struct Args {
    std::string dir, manifest;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("collect", "Merge a batch run's per-task summaries: done, failed, missing (against the manifest)");
  cmd->add_option("dir", a->dir, "Output folder of the batch run (holding summaries/), or the summaries folder itself")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--manifest", a->manifest, "The manifest to check against (default: the one the summaries name)")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--json", a->json, "Print the table as JSON on stdout");
  cmd->footer(
      "Example:\n  tessera collect out/             after 'sbatch --array=0-9 scripts/slurm/embed_wsi.sbatch cohort.csv out/'\n"
      "Exit code 0 only when every manifest row is done.");
  cmd->callback([a, &exit_code] {
    fs::path sdir = fs::path(batch::summaries_dir(a->dir));
    if (!fs::is_directory(sdir)) sdir = a->dir;
    std::vector<json> summaries;
    for (const auto& e : fs::directory_iterator(sdir)) {
      if (e.path().extension() != ".json") continue;
      std::ifstream in(e.path());
      try {
        json j = json::parse(in);
        if (j.is_object() && j.contains("command") && j.contains("items")) summaries.push_back(std::move(j));
      } catch (const std::exception& ex) {
        throw std::runtime_error(e.path().string() + ": not a summary: " + std::string(ex.what()).substr(0, 80));
      }
    }
    if (summaries.empty()) throw std::runtime_error(sdir.string() + ": no task summaries (*.json) found");
    std::sort(summaries.begin(), summaries.end(),
              [](const json& x, const json& y) { return x.value("started_epoch", 0.0) < y.value("started_epoch", 0.0); });
    const std::string command = summaries.front()["command"];
    std::string manifest = a->manifest;
    for (const auto& s : summaries) {
      if (s["command"] != command)
        throw std::runtime_error(sdir.string() + ": summaries of two commands (" + command + ", " + s["command"].get<std::string>() +
                                 "): collect one run at a time");
      if (a->manifest.empty()) {
        const std::string m = s.value("manifest", "");
        if (manifest.empty()) manifest = m;
        else if (m != manifest)
          throw std::runtime_error(sdir.string() + ": summaries of two manifests (" + manifest + ", " + m + "): pass --manifest");
      }
    }
    const auto rows = batch::read_manifest(manifest, batch::spec_for(command));
    std::vector<RowState> state(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) state[i].input = rows[i].input;
    std::vector<std::string> task_errors;
    int tasks = 0, unfinished = 0;
    for (const auto& s : summaries) {
      ++tasks;
      if (!s.value("finished", false)) ++unfinished;
      if (s.contains("error")) task_errors.push_back(s.value("job", std::string("a task")) + ": " + s["error"].get<std::string>());
      const double t = s.value("started_epoch", 0.0);
      for (const auto& it : s["items"]) {
        const int row = it.value("row", -1);
        if (row < 0 || row >= int(rows.size()) || it.value("input", "") != rows[row].input) continue;  // another manifest
        RowState& r = state[row];
        const std::string st = it.value("status", "");
        const std::string reason = it.value("reason", "");
        const std::string output = it.value("output", "");
        if (st == "done" || (st == "skipped" && reason == "output exists")) {
          std::error_code ec;
          if (fs::exists(output, ec)) {
            r.status = "done";
            r.output = output;
            r.detail = "";
          } else if (r.status != "done") {
            r.detail = "reported done but " + output + " is gone";
          }
        } else if (st == "failed" && r.status != "done" && t >= r.last_failure) {
          r.status = "failed";
          r.detail = it.value("error", "");
          r.last_failure = t;
        } else if (st == "skipped" && r.status == "missing") {
          r.detail = reason;
        }
      }
    }
    int done = 0, failed = 0, missing = 0;
    for (const auto& r : state) (r.status == "done" ? done : r.status == "failed" ? failed : missing)++;
    const bool ok = failed == 0 && missing == 0 && task_errors.empty();
    if (a->json) {
      json t = json::array();
      for (size_t i = 0; i < state.size(); ++i)
        t.push_back({{"row", i}, {"input", state[i].input}, {"status", state[i].status}, {"output", state[i].output},
                     {"detail", state[i].detail}});
      std::cout << json{{"command", command}, {"manifest", manifest}, {"tasks", tasks}, {"unfinished_tasks", unfinished},
                        {"done", done}, {"failed", failed}, {"missing", missing}, {"task_errors", task_errors}, {"rows", t}}
                       .dump(2)
                << "\n";
    } else {
      std::cout << "row\tstatus\tinput\tdetail\n";
      for (size_t i = 0; i < state.size(); ++i)
        std::cout << i + 1 << "\t" << state[i].status << "\t" << state[i].input << "\t"
                  << (state[i].status == "done" ? state[i].output : state[i].detail) << "\n";
      for (const auto& e : task_errors) std::cout << "task error\t" << e << "\n";
      std::cout << command << " " << manifest << ": " << done << " done, " << failed << " failed, " << missing << " missing ("
                << tasks << " task summaries, " << unfinished << " unfinished)\n";
    }
    if (!ok)
      std::cerr << "tessera: collect: " << failed << " failed, " << missing << " missing"
                << (task_errors.empty() ? "" : ", " + std::to_string(task_errors.size()) + " task errors") << "\n";
    exit_code = ok ? kOk : kFailure;
  });
}

}  // namespace tessera::apps
