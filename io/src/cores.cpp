#include "tessera/io/cores.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <thread>

namespace tessera::io {
namespace {

int affinity_cores() {
  const int machine = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // A mask as wide as the machine's CPU numbers (which can exceed the count of online CPUs).
  for (int width = std::max(machine, 1024); width <= (1 << 16); width *= 2) {
    cpu_set_t* set = CPU_ALLOC(width);
    if (!set) break;
    const size_t bytes = CPU_ALLOC_SIZE(width);
    CPU_ZERO_S(bytes, set);
    const int rc = sched_getaffinity(0, bytes, set);
    const int n = rc == 0 ? CPU_COUNT_S(bytes, set) : -1;
    CPU_FREE(set);
    if (rc == 0) return std::max(1, n);
    if (errno != EINVAL) break;  // EINVAL: the mask is too narrow for the kernel's
  }
  return machine;
}

// Quota / period of one cgroup folder, or infinity without a limit.
double folder_quota(const std::string& dir, bool v2) {
  if (v2) {
    std::ifstream f(dir + "/cpu.max");  // "max 100000" or "<quota> <period>"
    std::string quota;
    double period = 0;
    if (f >> quota >> period && period > 0) {
      char* end = nullptr;
      const double q = std::strtod(quota.c_str(), &end);
      if (end != quota.c_str() && *end == '\0' && q > 0) return q / period;
    }
  } else {
    std::ifstream q(dir + "/cpu.cfs_quota_us"), p(dir + "/cpu.cfs_period_us");
    double quota = -1, period = 0;
    if (q >> quota && p >> period && quota > 0 && period > 0) return quota / period;
  }
  return std::numeric_limits<double>::infinity();
}

// The tightest CPU quota from this process's cgroup up to the root of its hierarchy.
double cgroup_quota() {
  std::ifstream self("/proc/self/cgroup");
  double tightest = std::numeric_limits<double>::infinity();
  for (std::string line; std::getline(self, line);) {
    // "0::/path" (v2) or "N:cpu,cpuacct:/path" (v1)
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    const bool v2 = line.compare(0, a, "0") == 0 && controllers.empty();
    std::string root;
    if (v2) {
      root = "/sys/fs/cgroup";
    } else {
      std::stringstream cs(controllers);
      bool cpu = false;
      for (std::string c; std::getline(cs, c, ',');) cpu = cpu || c == "cpu";
      if (!cpu) continue;
      root = "/sys/fs/cgroup/" + controllers;
      if (!std::ifstream(root + "/cpu.cfs_quota_us")) root = "/sys/fs/cgroup/cpu";
    }
    for (;;) {
      tightest = std::min(tightest, folder_quota(root + (path == "/" ? "" : path), v2));
      if (path.empty() || path == "/") break;
      path = path.substr(0, path.find_last_of('/'));
      if (path.empty()) path = "/";
    }
  }
  return tightest;
}

}  // namespace

int usable_cores() {
  int n = affinity_cores();  // asked each time: a job or a test may narrow the mask while the process runs
  static const double quota = cgroup_quota();  // a walk over the cgroup files, read once
  if (std::isfinite(quota) && quota > 0) n = std::min(n, std::max(1, static_cast<int>(std::ceil(quota))));
  return std::max(1, n);
}

}  // namespace tessera::io
