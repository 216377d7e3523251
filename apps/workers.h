// One machine, several devices: `--gpus 0,1` (or `--worker-devices cpu,cpu`)
// on embed-wsi, segment and video re-runs the same command line once per
// device, as worker processes over one queue of inputs. The queue is the
// batch run's lock files (apps/batch.h): a worker skips an input whose output
// exists or whose lock a live worker holds, so no input is done twice, and a
// killed run resumes on the next invocation (a dead worker's locks are broken).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace tessera::apps {

struct WorkerOptions {
  std::string gpus;     // "0,1,...": CUDA device indices, one worker each
  std::string devices;  // --worker-devices "cpu,cpu", "cuda:0,cuda:0": any --device value, repeats allowed
  bool given() const { return !gpus.empty() || !devices.empty(); }
  std::string option() const { return gpus.empty() ? "--worker-devices" : "--gpus"; }
};

// Adds --gpus and --worker-devices; call after add_compute_options and batch::add_options (it
// excludes their --device and --shard).
void add_worker_options(CLI::App* cmd, WorkerOptions& w);

// One device string per worker ("cuda:1", "cpu"); empty when neither option is given. A bad list
// (an empty entry, a duplicate or negative GPU index, an index this machine lacks) throws one line
// naming the option.
std::vector<std::string> worker_devices(const WorkerOptions& w);

// Runs this process's command line once per device (without --gpus/--worker-devices, with
// --device D --worker I --json), each worker's stderr lines prefixed "[D] ". Forwards SIGINT and
// SIGTERM to the workers, merges their --json results per input (done > failed > skipped), and
// prints that (with --json) or a one-line tally on stderr. `items_key` is the command's list of
// inputs in its --json output ("slides", "inputs", "videos"). Returns the exit code: kFailure,
// with a line per worker that failed naming it and its device, when any did.
int run_workers(const std::vector<std::string>& devices, const std::string& items_key, bool json);

}  // namespace tessera::apps
