// Device strings: --device (parse_device, checked_device, resolve_compute) and the worker lists of
// --gpus / --worker-devices. Errors are one line naming the option.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "../error_of.h"
#include "compute_options.h"
#include "workers.h"

namespace ta = tessera::apps;
using tessera::test_support::error_of;

namespace {

std::string missing_gpu() { return std::to_string(torch::cuda::is_available() ? torch::cuda::device_count() : 0); }

}  // namespace

TEST(ParseDevice, AcceptsCpuCudaAndIndexedCuda) {
  EXPECT_EQ(ta::parse_device("cpu"), torch::Device(torch::kCPU));
  EXPECT_EQ(ta::parse_device("cuda"), torch::Device(torch::kCUDA));
  EXPECT_EQ(ta::parse_device("cuda:0"), torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(ta::parse_device("cuda:7"), torch::Device(torch::kCUDA, 7));
  EXPECT_EQ(ta::parse_device("cuda:127"), torch::Device(torch::kCUDA, 127));
}

TEST(ParseDevice, RejectsGarbage) {
  for (const char* s : {"", "gpu", "GPU", "cuda:", "cuda:x", "cuda:-1", "cuda:+1", "cuda:1.0", "cuda: 1", "cuda:0,1", "cuda:128",
                        "cuda:1000", "cpu:0", "cuda0", " cuda", "mps"})
    EXPECT_FALSE(ta::parse_device(s).has_value()) << s;
}

TEST(CheckedDevice, CpuIsAlwaysThere) { EXPECT_EQ(ta::checked_device("cpu", "--device"), torch::Device(torch::kCPU)); }

TEST(CheckedDevice, NamesTheOptionOnGarbage) {
  const std::string e = error_of([] { ta::checked_device("cuda:x", "--device"); });
  EXPECT_NE(e.find("--device"), std::string::npos) << e;
  EXPECT_NE(e.find("cuda:x"), std::string::npos) << e;
}

TEST(CheckedDevice, AnIndexPastTheLastDeviceFails) {
  const std::string d = "cuda:" + missing_gpu();
  const std::string e = error_of([&] { ta::checked_device(d, "--device"); });
  EXPECT_NE(e.find("--device " + d + ": "), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(ResolveCompute, FailsOneLineNamingDevice) {
  for (const std::string& d : {std::string("gpu"), std::string("cuda:x"), "cuda:" + missing_gpu()}) {
    ta::ComputeOptions o;
    o.device = d;
    const std::string e = error_of([&] { ta::resolve_compute(o, "fp32"); });
    EXPECT_NE(e.find("--device"), std::string::npos) << d << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  if (!torch::cuda::is_available()) {
    ta::ComputeOptions o;
    o.device = "cuda";
    EXPECT_NE(error_of([&] { ta::resolve_compute(o, "fp32"); }).find("no CUDA device"), std::string::npos);
  }
}

TEST(ResolveCompute, Cpu) {
  ta::ComputeOptions o;
  const ta::Compute c = ta::resolve_compute(o, "bf16");
  EXPECT_EQ(c.device, torch::Device(torch::kCPU));
  EXPECT_EQ(c.dtype, torch::kBFloat16);
}

TEST(WorkerDevices, NoneWithoutTheOptions) { EXPECT_TRUE(ta::worker_devices({}).empty()); }

TEST(WorkerDevices, CpuWorkersMayRepeat) {
  ta::WorkerOptions w;
  w.devices = "cpu,cpu,cpu";
  EXPECT_EQ(ta::worker_devices(w), (std::vector<std::string>{"cpu", "cpu", "cpu"}));
}

TEST(WorkerDevices, BadListsNameTheOption) {
  const std::pair<std::string, std::string> gpus[] = {
      {"0,,1", "empty entry"}, {"-1", "'-1'"}, {"1,x", "'x'"}, {"0,1,0", "listed twice"}, {"0,", "empty entry"}, {missing_gpu(), "cuda:"}};
  for (const auto& [list, why] : gpus) {
    ta::WorkerOptions w;
    w.gpus = list;
    const std::string e = error_of([&] { ta::worker_devices(w); });
    EXPECT_NE(e.find("--gpus"), std::string::npos) << list << ": " << e;
    EXPECT_NE(e.find(why), std::string::npos) << list << ": " << e;
  }
  ta::WorkerOptions w;
  w.devices = "cpu,gpu";
  const std::string e = error_of([&] { ta::worker_devices(w); });
  EXPECT_NE(e.find("--worker-devices"), std::string::npos) << e;
  EXPECT_NE(e.find("'gpu'"), std::string::npos) << e;
}

TEST(WorkerDevices, SyntaxIsCheckedBeforeTheDevicesExist) {
  ta::WorkerOptions w;
  w.gpus = missing_gpu() + ",,";
  EXPECT_NE(error_of([&] { ta::worker_devices(w); }).find("empty entry"), std::string::npos);
}
