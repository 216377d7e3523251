// How many cores this process may use: what thread pools size themselves by.
#pragma once

namespace tessera::io {

// The CPUs of this process's affinity mask (what Slurm's and containers' cpusets allow), capped by its cgroup's
// CPU quota (cgroup v2 cpu.max or v1 cfs_quota_us, rounded up, the tightest up the hierarchy); at least 1.
// std::thread::hardware_concurrency() counts the machine's CPUs, e.g. 128 on a node where a job holds 8.
int usable_cores();

}  // namespace tessera::io
