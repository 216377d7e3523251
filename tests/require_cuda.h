// The LibTorch GPU tests (label gpu) skip, rather than fail, where no CUDA device is present:
// CI and the development machine have none; the H200 runs them.
#pragma once

#include <gtest/gtest.h>
#include <torch/cuda.h>

#define REQUIRE_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device"
