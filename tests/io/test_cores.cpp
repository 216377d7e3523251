// usable_cores follows the affinity mask (Slurm's and containers' cpusets), not the machine's CPU count.
#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

#include "tessera/io/cores.h"

namespace tessera::io {
namespace {

TEST(UsableCores, AtLeastOneAtMostTheMachine) {
  const int n = usable_cores();
  EXPECT_GE(n, 1);
  EXPECT_LE(n, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

TEST(UsableCores, FollowsTheAffinityMask) {
  const int all = usable_cores();
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c)
    if (CPU_ISSET(c, &before)) first = c;
  ASSERT_GE(first, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  const int n = usable_cores();
  ASSERT_EQ(sched_setaffinity(0, sizeof(before), &before), 0);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(usable_cores(), all);  // and back
}

}  // namespace
}  // namespace tessera::io
