#include "batch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "tessera/io/atomic_file.h"

namespace tessera::apps::batch {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// Splits one CSV record; `line` may gain following physical lines for quoted newlines.
bool split_csv(std::istream& in, std::string line, int& line_no, std::vector<std::string>& cells, std::string& error) {
  cells.clear();
  std::string cell;
  bool quoted = false, was_quoted = false;
  for (size_t i = 0;; ++i) {
    if (i == line.size()) {
      if (!quoted) break;
      std::string more;
      if (!std::getline(in, more)) {
        error = "unterminated quoted field";
        return false;
      }
      ++line_no;
      if (!more.empty() && more.back() == '\r') more.pop_back();
      line += "\n" + more;
    }
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell += c;
      }
    } else if (c == '"') {
      if (!trim(cell).empty()) {
        error = "a quote inside an unquoted field";
        return false;
      }
      cell.clear();
      quoted = was_quoted = true;
    } else if (c == ',') {
      cells.push_back(was_quoted ? cell : trim(cell));
      cell.clear();
      was_quoted = false;
    } else {
      if (was_quoted && c != ' ' && c != '\t') {
        error = "text after a closing quote";
        return false;
      }
      cell += c;
    }
  }
  cells.push_back(was_quoted ? cell : trim(cell));
  return true;
}

std::string hostname() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// Start time of a process in clock ticks since boot (/proc/PID/stat field 22); 0 if unknown.
unsigned long long proc_start(long pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  if (!std::getline(f, s)) return 0;
  const auto close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(s.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22; ++i)
    if (!(rest >> field)) return 0;
  try {
    return std::stoull(field);
  } catch (...) {
    return 0;
  }
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string iso_time(double t) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

double age_s(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return now_s() - (double(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec * 1e-9);
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

// ---- manifest ---------------------------------------------------------------

std::vector<ManifestRow> read_manifest(const std::string& path, const ManifestSpec& spec) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open the manifest");
  std::error_code ec;
  const fs::path base = fs::absolute(path, ec).parent_path();  // inputs and outputs recorded as absolute paths
  std::vector<ManifestRow> rows;
  std::vector<std::string> columns;  // named columns, from the header
  bool first = true;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const int start_line = line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trim(line).empty() || trim(line)[0] == '#') continue;
    std::vector<std::string> cells;
    std::string error;
    const bool ok = split_csv(in, line, line_no, cells, error);
    if (first) {
      first = false;
      if (ok && std::find(spec.input_columns.begin(), spec.input_columns.end(), cells[0]) != spec.input_columns.end()) {
        for (size_t c = 1; c < cells.size(); ++c) {
          if (std::find(spec.option_columns.begin(), spec.option_columns.end(), cells[c]) == spec.option_columns.end()) {
            std::string known;
            for (const auto& k : spec.option_columns) known += (known.empty() ? "" : ", ") + k;
            throw std::runtime_error(path + ":" + std::to_string(start_line) + ": unknown column '" + cells[c] +
                                     "' (per-row options here: " + (known.empty() ? "none" : known) + ")");
          }
        }
        columns = cells;
        continue;
      }
    }
    ManifestRow r;
    r.index = static_cast<int>(rows.size());
    r.line = start_line;
    const std::string where = path + ":" + std::to_string(start_line) + ": ";
    if (!ok) {
      r.error = where + error;
    } else if (cells[0].empty()) {
      r.error = where + "no input in the first column";
    } else if (!columns.empty() && cells.size() > columns.size()) {
      r.error = where + std::to_string(cells.size()) + " cells but the header names " + std::to_string(columns.size()) + " columns";
    } else {
      const fs::path p(cells[0]);
      r.input = p.is_absolute() || base.empty() ? p.string() : (base / p).string();
      for (size_t c = 1; c < cells.size() && c < columns.size(); ++c)
        if (!cells[c].empty()) r.options[columns[c]] = cells[c];
    }
    if (!ok || cells[0].empty()) r.input = ok ? "" : trim(line.substr(0, line.find(',')));
    rows.push_back(std::move(r));
  }
  if (rows.empty()) throw std::runtime_error(path + ": the manifest lists no inputs");
  return rows;
}

std::string row_place(const std::string& manifest, const ManifestRow& row) {
  if (manifest.empty() || row.line == 0) return "input " + std::to_string(row.index);
  return manifest + " row " + std::to_string(row.index + 1) + " (line " + std::to_string(row.line) + ")";
}

double option_double(const ManifestRow& row, const std::string& column, double fallback) {
  const auto it = row.options.find(column);
  if (it == row.options.end()) return fallback;
  try {
    size_t used = 0;
    const double v = std::stod(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  throw std::runtime_error("column " + column + ": expected a number, got '" + it->second + "'");
}

std::vector<double> option_doubles(const ManifestRow& row, const std::string& column, size_t count) {
  const auto it = row.options.find(column);
  if (it == row.options.end()) return {};
  std::string s = it->second;
  std::replace(s.begin(), s.end(), 'x', ' ');
  std::istringstream in(s);
  std::vector<double> out;
  double v;
  while (in >> v) out.push_back(v);
  if (!in.eof() || out.size() != count)
    throw std::runtime_error("column " + column + ": expected " + std::to_string(count) + " numbers (\"1.5 1.5 2\"), got '" +
                             it->second + "'");
  return out;
}

// ---- shard ------------------------------------------------------------------

Shard parse_shard(const std::string& s) {
  const auto slash = s.find('/');
  try {
    if (slash != std::string::npos) {
      size_t u1 = 0, u2 = 0;
      const std::string a = s.substr(0, slash), b = s.substr(slash + 1);
      const int i = std::stoi(a, &u1), n = std::stoi(b, &u2);
      if (u1 == a.size() && u2 == b.size() && n >= 1 && i >= 0 && i < n) return {i, n, "--shard"};
    }
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("--shard: expected i/n with 0 <= i < n, got '" + s + "'");
}

Shard shard_from_environment() {
  const char* id_s = env("SLURM_ARRAY_TASK_ID");
  if (!id_s) return {0, 1, ""};
  auto num = [](const char* name, long fallback) {
    const char* v = env(name);
    if (!v) return fallback;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (*end) throw std::invalid_argument(std::string(name) + "=" + v + ": not a number");
    return x;
  };
  const long id = num("SLURM_ARRAY_TASK_ID", 0), min = num("SLURM_ARRAY_TASK_MIN", 0), max = num("SLURM_ARRAY_TASK_MAX", id),
             step = std::max(1L, num("SLURM_ARRAY_TASK_STEP", 1));
  const long count = num("SLURM_ARRAY_TASK_COUNT", (max - min) / step + 1);
  const long index = (id - min) / step;
  const std::string where = "SLURM_ARRAY_TASK_ID=" + std::to_string(id) + " (MIN " + std::to_string(min) + ", MAX " +
                            std::to_string(max) + ", STEP " + std::to_string(step) + ", COUNT " + std::to_string(count) + ")";
  if (id < min || (id - min) % step != 0 || count < 1 || index >= count)
    throw std::invalid_argument(where + ": the array's task ids must be one evenly spaced range (--array=A-B or A-B:S); "
                                "for other id lists pass --shard i/n");
  return {static_cast<int>(index), static_cast<int>(count), "slurm"};
}

Shard resolve_shard(const std::string& cli) { return cli.empty() ? shard_from_environment() : parse_shard(cli); }

// ---- locks ------------------------------------------------------------------

struct LockFile::Heartbeat {
  std::mutex m;
  std::condition_variable cv;
  bool stop = false;
  std::thread thread;
};

LockFile::LockFile(std::string path, double stale_s) : path_(std::move(path)), heartbeat_(std::make_unique<Heartbeat>()) {
  const auto every = std::chrono::duration<double>(std::clamp(stale_s / 4, 0.5, 60.0));
  Heartbeat* hb = heartbeat_.get();
  const std::string p = path_;
  hb->thread = std::thread([hb, p, every] {
    std::unique_lock<std::mutex> lk(hb->m);
    while (!hb->cv.wait_for(lk, every, [hb] { return hb->stop; })) ::utimensat(AT_FDCWD, p.c_str(), nullptr, 0);
  });
}

LockFile::~LockFile() {
  {
    std::lock_guard<std::mutex> lk(heartbeat_->m);
    heartbeat_->stop = true;
  }
  heartbeat_->cv.notify_all();
  heartbeat_->thread.join();
  ::unlink(path_.c_str());
}

namespace {

// Why the lock at `path` (content `text`) is stale, or "" when its holder may be alive.
std::string stale_reason(const std::string& path, const std::string& text, double stale_s) {
  const double age = age_s(path);
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception&) {
    // Empty or torn: its writer died between creating and filling it, or is filling it now.
    return age > std::min(stale_s, 30.0) ? "unreadable lock, " + std::to_string(int(age)) + " s old" : "";
  }
  const std::string host = j.value("host", "");
  const long pid = j.value("pid", 0L);
  const unsigned long long start = j.value("proc_start", 0ULL);
  if (host == hostname()) {
    if (pid <= 0) return "no pid recorded";
    if (::kill(pid, 0) != 0 && errno == ESRCH) return "pid " + std::to_string(pid) + " on this host is gone";
    const unsigned long long now_start = proc_start(pid);
    if (start && now_start && now_start != start) return "pid " + std::to_string(pid) + " is now another process";
    return "";
  }
  if (age > stale_s)
    return "holder on " + host + " silent for " + std::to_string(int(age)) + " s (> " + std::to_string(int(stale_s)) + " s)";
  return "";
}

std::string describe_holder(const std::string& text) {
  try {
    const json j = json::parse(text);
    std::string s = "host " + j.value("host", "?") + ", pid " + std::to_string(j.value("pid", 0L));
    if (!j.value("job", "").empty()) s += ", job " + j.value("job", "");
    return s + ", since " + j.value("started", "?");
  } catch (const std::exception&) {
    return "a lock being written";
  }
}

// Removes the temporary files a dead holder on this host left beside `output` (io::write_atomically's names).
void remove_dead_temporaries(const std::string& output, long pid) {
  const fs::path out(output);
  const fs::path dir = out.has_parent_path() ? out.parent_path() : fs::path(".");
  const std::string name = out.filename().string(), ext = io::full_extension(name);
  const std::string stem = name.substr(0, name.size() - ext.size()), p = std::to_string(pid);
  std::error_code ec;
  fs::remove(dir / (name + ".tmp." + p), ec);
  fs::remove(dir / ("." + stem + ".tmp." + p + ext), ec);
}

std::string job_id() {
  if (const char* a = env("SLURM_ARRAY_JOB_ID")) return std::string(a) + "_" + (env("SLURM_ARRAY_TASK_ID") ? env("SLURM_ARRAY_TASK_ID") : "");
  if (const char* j = env("SLURM_JOB_ID")) return j;
  return "";
}

}  // namespace

std::unique_ptr<LockFile> LockFile::acquire(const std::string& path, double stale_s, std::string& held_by) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd >= 0) {
      const json j = {{"host", hostname()}, {"pid", long(::getpid())}, {"proc_start", proc_start(::getpid())},
                      {"started", iso_time(now_s())}, {"job", job_id()}};
      const std::string text = j.dump() + "\n";
      const bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
      ::close(fd);
      if (!ok) {
        ::unlink(path.c_str());
        throw std::runtime_error(path + ": cannot write the lock file: " + std::strerror(errno));
      }
      return std::unique_ptr<LockFile>(new LockFile(path, stale_s));
    }
    if (errno != EEXIST) throw std::runtime_error(path + ": cannot create the lock file: " + std::strerror(errno));
    const std::string text = read_text(path);
    const std::string why = stale_reason(path, text, stale_s);
    if (why.empty()) {
      held_by = describe_holder(text);
      return nullptr;
    }
    // Break it, one breaker at a time: whoever creates "<lock>.break" re-reads the lock and removes it if unchanged.
    const std::string brk = path + ".break";
    const int bfd = ::open(brk.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (bfd < 0) {
      if (age_s(brk) > 60) ::unlink(brk.c_str());  // a breaker that died breaking
      held_by = "another task breaking a stale lock";
      continue;
    }
    ::close(bfd);
    if (read_text(path) == text) {
      ::unlink(path.c_str());
      std::cerr << "tessera: broke a stale lock " << path << " (" << describe_holder(text) << "): " << why << "\n";
      try {
        const json j = json::parse(text);
        if (j.value("host", "") == hostname())
          remove_dead_temporaries(path.substr(0, path.size() - std::string(".lock").size()), j.value("pid", 0L));
      } catch (const std::exception&) {
      }
    }
    ::unlink(brk.c_str());
  }
  return nullptr;
}

// ---- the run ----------------------------------------------------------------

void add_options(CLI::App* cmd, Options& o, const std::string& what) {
  cmd->add_option("--manifest", o.manifest, "CSV manifest: one " + what + " per row (see 'Running on a cluster' in README.md)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--shard", o.shard,
                  "i/n: process manifest rows i, i+n, ... (default in a Slurm job array: from SLURM_ARRAY_TASK_ID/COUNT/MIN)");
  cmd->add_option("--lock-stale", o.lock_stale_s,
                  "Seconds after which a lock whose holder is on another host and has stopped its heartbeat is broken")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--worker", o.worker)->group("")->check(CLI::NonNegativeNumber);  // set by apps/workers.cpp only
}

std::string summaries_dir(const std::string& out_dir) { return (fs::path(out_dir) / "summaries").string(); }

namespace {

std::string summary_path(const Job& job) {
  std::string tag;
  if (const char* a = env("SLURM_ARRAY_JOB_ID"))
    tag = std::string("job") + a + "_" + (env("SLURM_ARRAY_TASK_ID") ? env("SLURM_ARRAY_TASK_ID") : "x");
  else if (const char* j = env("SLURM_JOB_ID"))
    tag = std::string("job") + j;
  else
    tag = hostname() + "-" + std::to_string(::getpid());
  if (job.worker >= 0) tag += "-worker" + std::to_string(job.worker);
  const std::string shard = "shard" + std::to_string(job.shard.index) + "of" + std::to_string(job.shard.count);
  return (fs::path(summaries_dir(job.out_dir)) / (job.command + "-" + shard + "-" + tag + ".json")).string();
}

json summary_head(const Job& job, double started) {
  std::string manifest = job.manifest;
  std::error_code ec;
  const auto abs = fs::absolute(manifest, ec);
  if (!ec) manifest = abs.string();
  return {{"command", job.command},
          {"manifest", manifest},
          {"shard", {{"index", job.shard.index}, {"count", job.shard.count}, {"source", job.shard.source}}},
          {"job", job_id()},
          {"host", hostname()},
          {"pid", long(::getpid())},
          {"worker", job.worker},
          {"started", iso_time(started)},
          {"started_epoch", started}};
}

}  // namespace

Job begin_job(const std::string& command, const std::string& out_dir, const Options& o, bool quiet,
              std::vector<ManifestRow>* rows) {
  Job job;
  job.command = command;
  job.out_dir = out_dir;
  job.manifest = o.manifest;
  job.lock_stale_s = o.lock_stale_s;
  job.worker = o.worker;
  job.quiet = quiet;
  try {
    job.shard = resolve_shard(o.shard);
  } catch (const std::invalid_argument& e) {
    write_error_summary(job, e.what());
    if (o.shard.empty()) throw std::runtime_error(e.what());  // from SLURM_ARRAY_TASK_*: not a CLI argument
    throw CLI::ValidationError("--shard", e.what());
  }
  if (rows && !o.manifest.empty()) {
    try {
      *rows = read_manifest(o.manifest, spec_for(command));
    } catch (const std::exception& e) {
      write_error_summary(job, e.what());
      throw;
    }
  }
  return job;
}

std::string write_error_summary(const Job& job, const std::string& error) {
  if (job.out_dir.empty()) return "";
  const double t0 = now_s();
  json s = summary_head(job, t0);
  s["finished"] = true;
  s["error"] = error;
  s["seconds"] = 0.0;
  s["counts"] = {{"done", 0}, {"skipped", 0}, {"failed", 0}};
  s["items"] = json::array();
  fs::create_directories(summaries_dir(job.out_dir));
  const std::string p = summary_path(job);
  io::write_file_atomically(p, s.dump(2) + "\n");
  return p;
}

Result run(const Job& job, const std::vector<ManifestRow>& rows) {
  Result res;
  const double t0 = now_s();
  json summary;
  if (!job.manifest.empty()) {
    summary = summary_head(job, t0);
    fs::create_directories(summaries_dir(job.out_dir));
    res.summary_path = summary_path(job);
  }
  auto save = [&](bool finished) {
    if (res.summary_path.empty()) return;
    summary["finished"] = finished;
    summary["seconds"] = now_s() - t0;
    summary["counts"] = {{"done", res.done}, {"skipped", res.skipped}, {"failed", res.failed}};
    summary["items"] = res.items;
    io::write_file_atomically(res.summary_path, summary.dump(2) + "\n");
  };
  auto fail = [&](const ManifestRow& row, json& rec, const std::string& what) {
    const std::string msg = first_line(what);
    // The place in the manifest, unless the message already starts with it.
    const bool placed = job.manifest.empty() || msg.rfind(job.manifest + ":", 0) == 0;
    const std::string line = placed ? msg : row_place(job.manifest, row) + ": " + msg;
    rec["status"] = "failed";
    rec["error"] = line;
    ++res.failed;
    std::cerr << "tessera: error: " << line << "\n";
  };
  // Said once the output is in place (for a staged row, on its rest's thread, as soon as it ends): one write, whole,
  // over the next row's progress bar on a terminal (the bar redraws below it).
  auto announce_done = [tty = ::isatty(2) != 0](const std::string& input, const std::string& output, double r0) {
    std::cerr << (std::string(tty ? "\r\033[K" : "") + "tessera: done " + input + " -> " + output + " (" +
                  std::to_string(now_s() - r0).substr(0, 5) + " s)\n");
  };
  auto count_done = [&](json& rec, const json& extra) {
    for (auto it = extra.begin(); it != extra.end(); ++it) rec[it.key()] = it.value();
    rec["status"] = "done";
    ++res.done;
  };
  auto record = [&](json& rec, double r0) {
    rec["seconds"] = now_s() - r0;
    // In row order, though a staged row is recorded when its rest ends, after the rows skipped meanwhile.
    auto at = res.items.end();
    while (at != res.items.begin() && (at - 1)->at("row").get<int>() > rec["row"].get<int>()) --at;
    res.items.insert(at, std::move(rec));
    save(false);
  };
  // A staged row whose rest runs on its own thread; `land` waits for it and records it.
  struct InFlight {
    const ManifestRow* row = nullptr;
    json rec;
    double r0 = 0;
    std::future<json> rest;  // ends with the row's lock released and its line said
  };
  std::optional<InFlight> flight;
  auto land = [&] {
    if (!flight) return;
    try {
      count_done(flight->rec, flight->rest.get());
    } catch (const std::exception& e) {
      fail(*flight->row, flight->rec, e.what());
    }
    record(flight->rec, flight->r0);
    flight.reset();
  };
  auto output_path = [&](const ManifestRow& row) {
    std::error_code ec;
    const std::string output = job.output_of(row);
    return job.manifest.empty() ? output : fs::absolute(output, ec).string();
  };
  // The row read ahead (Job::upcoming) is reserved by taking its lock: another worker moves on to a later row,
  // and no read-ahead is wasted on a row that someone else does.
  struct Reserved {
    size_t at = 0;
    std::unique_ptr<LockFile> lock;
  };
  std::optional<Reserved> reserved;
  auto reserve_after = [&](size_t i) {
    for (const ManifestRow* next = next_pending(job, rows, i + 1); next; next = next_pending(job, rows, (next - rows.data()) + 1)) {
      std::string output, held_by;
      try {
        output = output_path(*next);
      } catch (const std::exception&) {  // a bad per-row option: its row fails when reached
        continue;
      }
      std::unique_ptr<LockFile> lock = LockFile::acquire(output + ".lock", job.lock_stale_s, held_by);
      std::error_code ec;
      if (!lock || fs::exists(output, ec)) continue;
      reserved = Reserved{static_cast<size_t>(next - rows.data()), std::move(lock)};
      job.upcoming(*next);
      return;
    }
  };
  save(false);  // a started task shows in `collect` before its first row ends
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    if (row.index % job.shard.count != job.shard.index) continue;
    const double r0 = now_s();
    std::unique_ptr<LockFile> lock;  // this row's, when it was reserved
    if (reserved && reserved->at == i) {
      lock = std::move(reserved->lock);
      reserved.reset();
    }
    json rec = {{"row", row.index}, {"line", row.line}, {"input", row.input}};
    try {
      if (!row.error.empty()) throw std::runtime_error(row.error);
      std::error_code ec;
      if (!fs::exists(row.input, ec)) throw std::runtime_error(row.input + ": no such file or folder");
      const std::string output = output_path(row);
      rec["output"] = output;
      std::string held_by;
      if (fs::exists(output, ec)) {
        rec["status"] = "skipped";
        rec["reason"] = "output exists";
      } else if (!lock && !(lock = LockFile::acquire(output + ".lock", job.lock_stale_s, held_by))) {
        rec["status"] = "skipped";
        rec["reason"] = "locked (" + held_by + ")";
      } else if (fs::exists(output, ec)) {  // finished by the holder we raced with
        rec["status"] = "skipped";
        rec["reason"] = "output exists";
      } else {
        if (job.upcoming) reserve_after(i);
        if (job.stage) {
          Job::Finish rest = job.stage(row, output);
          land();  // the previous row's rest, before this one's starts: at most one in flight
          flight.emplace();
          flight->row = &row;
          flight->rec = std::move(rec);
          flight->r0 = r0;
          // The lock goes as soon as the output is in place, not when the next row lands: a task stopped between
          // the two would leave a finished row locked and unannounced.
          flight->rest = std::async(std::launch::async, [rest = std::move(rest), held = std::move(lock), input = row.input,
                                                         output, r0, announce_done]() mutable {
            std::unique_ptr<LockFile> lock = std::move(held);  // released here, on failure too
            json extra = rest();
            lock.reset();
            announce_done(input, output, r0);
            return extra;
          });
          continue;
        }
        const json extra = job.process(row, output);
        lock.reset();  // the output is in place: release before anything else can fail
        announce_done(row.input, output, r0);
        count_done(rec, extra);
      }
      if (rec["status"] == "skipped") {
        ++res.skipped;
        std::cerr << "tessera: skipped " << row.input << " (" << rec["reason"].get<std::string>() << ")\n";
      }
    } catch (const std::exception& e) {
      fail(row, rec, e.what());
    }
    record(rec, r0);
  }
  land();
  save(true);
  return res;
}

const ManifestRow* next_pending(const Job& job, const std::vector<ManifestRow>& rows, size_t from) {
  for (size_t i = from; i < rows.size(); ++i) {
    const auto& row = rows[i];
    if (row.index % job.shard.count != job.shard.index || !row.error.empty()) continue;
    try {
      std::error_code ec;
      if (fs::exists(row.input, ec) && !fs::exists(job.output_of(row), ec)) return &row;
    } catch (const std::exception&) {  // a bad per-row option: run() records it
    }
  }
  return nullptr;
}

bool any_pending(const Job& job, const std::vector<ManifestRow>& rows) { return next_pending(job, rows, 0) != nullptr; }

const ManifestSpec& spec_for(const std::string& command) {
  static const std::map<std::string, ManifestSpec> specs = {
      {"embed-wsi", {{"slide", "path", "slide_path", "input"}, {"fallback_mpp"}}},
      {"segment", {{"image", "input", "path", "ct"}, {"output", "series", "spacing", "reference"}}},
      {"video", {{"video", "input", "path"}, {"fps", "reference"}}},
  };
  const auto it = specs.find(command);
  if (it == specs.end()) throw std::runtime_error("unknown batch command '" + command + "'");
  return it->second;
}

}  // namespace tessera::apps::batch
