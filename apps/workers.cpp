#include "workers.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "commands.h"
#include "compute_options.h"

extern char** environ;

namespace tessera::apps {
namespace {

using nlohmann::json;

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, ',')) out.push_back(item);
  if (!s.empty() && s.back() == ',') out.push_back("");
  return out;
}

// This process's arguments as it was started (argv[0] dropped).
std::vector<std::string> command_line() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  std::string a;
  while (std::getline(f, a, '\0')) args.push_back(a);
  if (args.empty()) throw std::runtime_error("/proc/self/cmdline: cannot read this process's arguments");
  args.erase(args.begin());
  return args;
}

// The worker's arguments: ours without the worker options, with its device, index and --json.
std::vector<std::string> worker_args(const std::vector<std::string>& args, const std::string& device, size_t index) {
  std::vector<std::string> out;
  bool json = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--gpus" || a == "--worker-devices") {
      ++i;  // and its value
      continue;
    }
    if (a.rfind("--gpus=", 0) == 0 || a.rfind("--worker-devices=", 0) == 0) continue;
    json = json || a == "--json";
    out.push_back(a);
  }
  for (const std::string& a : {std::string("--device"), device, std::string("--worker"), std::to_string(index)}) out.push_back(a);
  if (!json) out.push_back("--json");
  return out;
}

struct Worker {
  std::string device, label;
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;
  std::string out, err_line;  // stdout (its --json result), the stderr line being read
  int status = 0;
};

// Workers' pids for the signal handler (async-signal-safe: a fixed array, kill() only).
constexpr int kMaxWorkers = 128;
volatile pid_t g_pids[kMaxWorkers];
volatile int g_count = 0;
volatile sig_atomic_t g_signal = 0;

void forward_signal(int sig) {
  g_signal = sig;
  for (int i = 0; i < g_count; ++i)
    if (g_pids[i] > 0) ::kill(g_pids[i], sig);
}

void spawn(Worker& w, const std::vector<std::string>& args) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("cannot make a pipe for a worker: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t def, none;
  sigemptyset(&def);
  sigaddset(&def, SIGINT);
  sigaddset(&def, SIGTERM);
  sigaddset(&def, SIGPIPE);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&at, &def);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> argv{const_cast<char*>("tessera")};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // The same binary as this process, even when the file behind its path was replaced since.
  const int rc = posix_spawn(&w.pid, "/proc/self/exe", &fa, &at, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  ::close(out[1]);
  ::close(err[1]);
  w.out_fd = out[0];
  w.err_fd = err[0];
  if (rc != 0) throw std::runtime_error("cannot start the worker for " + w.device + ": " + std::strerror(rc));
}

// Reads what is ready on fd; false at end of file.
bool drain(int fd, Worker& w, bool is_err) {
  char buf[65536];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (!is_err) {
    w.out.append(buf, size_t(n));
    return n > 0;
  }
  w.err_line.append(buf, size_t(n));
  size_t nl;
  while ((nl = w.err_line.find('\n')) != std::string::npos || (n == 0 && !w.err_line.empty())) {
    if (nl == std::string::npos) nl = w.err_line.size();  // a last line without its newline
    std::cerr << "[" << w.label << "] " << w.err_line.substr(0, nl) << "\n";
    w.err_line.erase(0, std::min(nl + 1, w.err_line.size()));
  }
  return n > 0;
}

void pump(std::vector<Worker>& workers) {
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Worker*, bool>> who;
    for (auto& w : workers)
      for (const bool is_err : {false, true}) {
        const int fd = is_err ? w.err_fd : w.out_fd;
        if (fd < 0) continue;
        fds.push_back({fd, POLLIN, 0});
        who.emplace_back(&w, is_err);
      }
    if (fds.empty()) return;
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;  // a forwarded signal
      throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Worker& w = *who[i].first;
      int& fd = who[i].second ? w.err_fd : w.out_fd;
      if (!drain(fd, w, who[i].second)) {
        ::close(fd);
        fd = -1;
      }
    }
  }
}

std::string exit_text(int status) {
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

int rank(const json& item) {
  const std::string s = item.value("status", "");
  return s == "done" ? 3 : s == "failed" ? 2 : s == "skipped" ? 1 : 0;
}

// SIGINT and SIGTERM go on to the workers while this lives; the parent goes on waiting for them.
class ForwardSignals {
 public:
  ForwardSignals() {
    struct sigaction sa {};
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
    g_signal = 0;
    g_count = 0;
  }
  ~ForwardSignals() {
    g_count = 0;
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {}, old_term_{};
};

void wait_all(std::vector<Worker>& workers) {
  for (auto& w : workers)
    while (w.pid > 0 && ::waitpid(w.pid, &w.status, 0) < 0 && errno == EINTR) {
    }
}

// Per input (its "row"), the record of the worker that did it (done > failed > skipped), printed
// with each worker's exit; a line per failed worker.
int report(const std::vector<Worker>& workers, const std::string& items_key, bool json_out) {
  std::map<int, json> merged;
  json summary = {{"workers", json::array()}};
  int failed_workers = 0;
  for (size_t i = 0; i < workers.size(); ++i) {
    const Worker& w = workers[i];
    const bool ok = w.pid > 0 && WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
    json entry = {{"worker", i}, {"device", w.device}, {"pid", w.pid}, {"status", w.pid > 0 ? exit_text(w.status) : "not started"}};
    json result;
    try {
      result = json::parse(w.out);
    } catch (const std::exception&) {  // killed before it printed: its finished inputs have their outputs, the rest resume
    }
    if (result.is_object()) {
      for (const char* k : {"done", "skipped", "failed", "summary"})
        if (result.contains(k)) entry[k] = result[k];
      for (json item : result.value(items_key, json::array())) {
        const int row = item.value("row", -1);
        item["worker"] = i;
        item["device"] = w.device;
        auto it = merged.find(row);
        if (it == merged.end() || rank(item) > rank(it->second)) merged[row] = item;
      }
    }
    summary["workers"].push_back(entry);
    if (!ok) {
      ++failed_workers;
      std::cerr << "tessera: error: worker " << i << " (" << w.device << ") " << entry["status"].get<std::string>() << "\n";
    }
  }
  int counts[4] = {0, 0, 0, 0};
  json items = json::array();
  for (auto& [row, item] : merged) {
    ++counts[rank(item)];
    items.push_back(item);
  }
  summary[items_key] = items;
  summary["done"] = counts[3];
  summary["skipped"] = counts[1];
  summary["failed"] = counts[2];
  if (g_signal) summary["interrupted_by_signal"] = int(g_signal);
  if (json_out) {
    std::cout << summary.dump(2) << "\n";
  } else if (g_signal) {
    std::cerr << "tessera: interrupted (signal " << g_signal << "): run the same command again to resume\n";
  } else {
    std::string list;
    for (const auto& w : workers) list += (list.empty() ? "" : ", ") + w.device;
    std::cerr << "tessera: " << workers.size() << " workers (" << list << "): " << counts[3] << " done, " << counts[1] << " skipped, "
              << counts[2] << " failed\n";
  }
  return failed_workers || counts[2] || g_signal ? kFailure : kOk;
}

}  // namespace

void add_worker_options(CLI::App* cmd, WorkerOptions& w) {
  auto* gpus = cmd->add_option("--gpus", w.gpus,
                               "LIST of CUDA indices (0,1,...): one worker process per GPU over the same inputs, sharing them "
                               "through the lock files (see 'Running on a cluster' in README.md)");
  auto* devs = cmd->add_option("--worker-devices", w.devices,
                               "LIST of devices as --device takes them, repeats allowed (cpu,cpu): one worker process each, as --gpus");
  gpus->excludes(devs);
  for (const char* other : {"--device", "--shard"}) {
    gpus->excludes(cmd->get_option(other));
    devs->excludes(cmd->get_option(other));
  }
  gpus->excludes(cmd->get_option("--worker"));
  devs->excludes(cmd->get_option("--worker"));
}

std::vector<std::string> worker_devices(const WorkerOptions& w) {
  if (!w.given()) return {};
  const std::string opt = w.option(), list = w.gpus.empty() ? w.devices : w.gpus;
  std::vector<std::string> devices;
  for (const std::string& e : split_list(list)) {
    if (e.empty()) throw CLI::ValidationError(opt, "an empty entry in '" + list + "'");
    const std::string d = w.gpus.empty() ? e : "cuda:" + e;
    if (!parse_device(d))
      throw CLI::ValidationError(opt, std::string(w.gpus.empty() ? "expected cpu, cuda or cuda:N" : "expected CUDA device indices like 0,1") +
                                          ", got '" + e + "' in '" + list + "'");
    if (!w.gpus.empty() && std::find(devices.begin(), devices.end(), d) != devices.end())
      throw CLI::ValidationError(opt, "GPU " + e + " is listed twice in '" + list + "'");
    devices.push_back(d);
  }
  if (devices.size() > size_t(kMaxWorkers)) throw CLI::ValidationError(opt, "at most " + std::to_string(kMaxWorkers) + " workers");
  for (const auto& d : devices) checked_device(d, opt);  // after the syntax: a typo is named before a missing GPU
  return devices;
}

int run_workers(const std::vector<std::string>& devices, const std::string& items_key, bool json_out) {
  const std::vector<std::string> args = command_line();
  std::vector<Worker> workers(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    workers[i].device = devices[i];
    const bool repeated = std::count(devices.begin(), devices.end(), devices[i]) > 1;
    workers[i].label = repeated ? devices[i] + "#" + std::to_string(i) : devices[i];
  }
  {
    const ForwardSignals forward;
    try {
      for (size_t i = 0; i < workers.size() && !g_signal; ++i) {
        spawn(workers[i], worker_args(args, devices[i], i));
        g_pids[i] = workers[i].pid;
        g_count = int(i + 1);
      }
      pump(workers);
    } catch (...) {  // no worker outlives its parent
      for (const auto& w : workers)
        if (w.pid > 0) ::kill(w.pid, SIGTERM);
      wait_all(workers);
      throw;
    }
    wait_all(workers);
  }
  return report(workers, items_key, json_out);
}

}  // namespace tessera::apps
