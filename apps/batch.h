// Batch runs shared by `embed-wsi`, `segment` and `video`: a CSV manifest
// (one input per row, plus per-row options), a shard of it per worker (from
// --shard or a Slurm job array's environment), a lock file per input that a
// dead worker's successor can break, and a per-task JSON summary that
// `tessera collect` merges.
//
// A row is done when its output file (the one the command writes last)
// exists: every output is written to a temporary name and renamed into place,
// so an existing output is a whole one and a rerun skips it.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessera::apps::batch {

// ---- manifest -------------------------------------------------------------

// One data row of a manifest. Rows are numbered 0.. over the data rows
// (malformed ones included), so that every row belongs to exactly one shard.
struct ManifestRow {
  int index = 0;                               // 0-based data row: the shard key
  int line = 0;                                // 1-based line in the file (0: not from a file)
  std::string input;                           // resolved against the manifest's folder
  std::map<std::string, std::string> options;  // non-empty per-row option cells, by column name
  std::string error;                           // non-empty: the row is malformed ("FILE:LINE: why")
};

struct ManifestSpec {
  std::vector<std::string> input_columns;   // header names of the input column; the first is the canonical one
  std::vector<std::string> option_columns;  // per-row options this command understands
};

// CSV (RFC 4180 quoting, '#' comment lines, blank lines skipped). A header
// row is recognised by its first cell naming an input column; without one,
// only the first column is read. An unknown header column, an unreadable or
// empty file throws; a malformed row becomes a row with `error` set.
std::vector<ManifestRow> read_manifest(const std::string& path, const ManifestSpec& spec);

// "FILE row N (line L)" for messages.
std::string row_place(const std::string& manifest, const ManifestRow& row);

// Per-row option parsing helpers: throw with the column name on bad values.
double option_double(const ManifestRow& row, const std::string& column, double fallback);
std::vector<double> option_doubles(const ManifestRow& row, const std::string& column, size_t count);

// ---- shard ----------------------------------------------------------------

struct Shard {
  int index = 0, count = 1;
  std::string source;  // "--shard", "slurm" (SLURM_ARRAY_TASK_*), or "" (the whole list)
};

// "i/n" with 0 <= i < n; throws std::invalid_argument with a one-line message.
Shard parse_shard(const std::string& spec);
// From SLURM_ARRAY_TASK_ID / _COUNT / _MIN / _MAX / _STEP; {0, 1, ""} outside a job array.
Shard shard_from_environment();
// --shard when given, otherwise Slurm's environment.
Shard resolve_shard(const std::string& cli_spec);

// ---- locks ----------------------------------------------------------------

// "<output>.lock" holding JSON {host, pid, proc_start, started, job}. The
// holder refreshes its modification time (the heartbeat) while it works. A
// lock is broken when its holder is gone: on the same host, its pid is not
// alive (or is alive but is another process: a different start time); on
// another host, its heartbeat is older than `stale_s` seconds.
class LockFile {
 public:
  // nullptr when a live holder has it; `held_by` then says who.
  static std::unique_ptr<LockFile> acquire(const std::string& path, double stale_s, std::string& held_by);
  ~LockFile();
  LockFile(const LockFile&) = delete;
  LockFile& operator=(const LockFile&) = delete;

 private:
  struct Heartbeat;
  LockFile(std::string path, double stale_s);
  std::string path_;
  std::unique_ptr<Heartbeat> heartbeat_;
};

// ---- the run --------------------------------------------------------------

// The options every batch command takes.
struct Options {
  std::string manifest, shard;
  double lock_stale_s = 600;
  int worker = -1;  // this process's index among the workers of a --gpus run (apps/workers.h); -1: not one
};
void add_options(CLI::App* cmd, Options& o, const std::string& what);

struct Job {
  std::string command;  // "embed-wsi", ...
  std::string out_dir;  // summaries go to OUT/summaries/ when `manifest` is set
  std::string manifest;
  Shard shard;
  double lock_stale_s = 600;
  int worker = -1;     // Options::worker: names the summary, so that workers of one task keep one each
  bool quiet = false;  // progress bars off (the per-input log lines stay)
  // The file whose existence marks a row done (written last, atomically). May throw (bad per-row option).
  std::function<std::string(const ManifestRow&)> output_of;
  // Does the work; returns extra fields for the summary; throws on failure.
  std::function<nlohmann::json(const ManifestRow&, const std::string& output)> process;
  // Instead of `process`, for a row in two parts: the device part, which returns the rest (pooling, writing
  // the outputs) to run on its own thread while the next row's device part runs, the row's lock held until
  // it ends; at most one such rest is in flight. It returns the summary's extra fields; either part may throw.
  using Finish = std::function<nlohmann::json()>;
  std::function<Finish(const ManifestRow&, const std::string& output)> stage;
  // Optional: told, just before a row is processed, of the next pending row of the shard, so that the command
  // can start reading it meanwhile; that row's lock is taken now, so no other worker does it instead.
  std::function<void(const ManifestRow&)> upcoming;
};

struct Result {
  nlohmann::json items = nlohmann::json::array();  // one record per row of this shard
  int done = 0, skipped = 0, failed = 0;
  std::string summary_path;  // empty without a manifest
};

// Runs this shard's rows: skip done ones, lock, process, record; one line on
// stderr per failure (naming the manifest row and the file). The summary is
// rewritten after every row ("finished": false until the end), so a killed
// task still leaves what it did.
Result run(const Job& job, const std::vector<ManifestRow>& rows);

// Whether any row of this shard still needs work (an existing input without its output):
// commands load their model only then, so a rerun over finished rows costs nothing.
bool any_pending(const Job& job, const std::vector<ManifestRow>& rows);
// The first row from index `from` on (of this shard, well-formed) whose input exists and whose output does not; nullptr if none.
const ManifestRow* next_pending(const Job& job, const std::vector<ManifestRow>& rows, size_t from);

// When the shard itself cannot be worked out (a bad --shard or Slurm
// environment) or the manifest cannot be read: a summary holding only the
// error, so that `collect` sees the task failed. Returns its path ("" when
// out_dir is empty).
std::string write_error_summary(const Job& job, const std::string& error);

// A job of `command` from its CLI options: the shard resolved and, when rows is given and a manifest
// is named, the manifest read. A failure is recorded in an error summary first, then thrown (a bad
// --shard as CLI::ValidationError, exit 2).
Job begin_job(const std::string& command, const std::string& out_dir, const Options& o, bool quiet,
              std::vector<ManifestRow>* rows);

// The folder holding the summaries of an output folder.
std::string summaries_dir(const std::string& out_dir);

// Manifest specs of the batch commands, shared with `collect`.
const ManifestSpec& spec_for(const std::string& command);

}  // namespace tessera::apps::batch
