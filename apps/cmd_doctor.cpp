// `tessera doctor`: what this build contains and what the machine offers.
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>
#include <torch/version.h>

#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "report_page.h"
#include "tessera/attention/attention.h"
#include "tessera/attention/call_spec.h"
#include "tessera/io/cores.h"
#include "tessera/io/features.h"

namespace tessera::apps {

namespace {

nlohmann::json collect() {
  namespace ta = tessera::attention;
  nlohmann::json j;
  j["tessera"] = TESSERA_VERSION;
  j["libtorch"] = TORCH_VERSION;
  j["cuda"] = {{"kernels_built", ta::cuda_compiled()},
               {"device_available", ta::cuda_available()},
               {"device_name", ta::cuda_device_name(0)}};
  j["cpu"] = {{"attention_isa", ta::cpu_isa()},
              {"hardware_threads", std::thread::hardware_concurrency()},
              {"usable_cores", tessera::io::usable_cores()},
              {"torch_threads", at::get_num_threads()}};
  // What tessera_io was actually built with (each is optional at configure time).
  const auto io = tessera::io::built_features();
  j["libraries"] = {{"itk", io.itk},       {"openslide", io.openslide}, {"ffmpeg", io.ffmpeg},
                    {"hdf5", io.hdf5},     {"opencv", io.opencv},       {"libtiff", io.tiff},
                    {"dcmtk", io.dcmtk}};
  j["report_viewers"] = report::viewers_built();
  return j;
}

void print_text(const nlohmann::json& j) {
  auto yes = [](bool b) { return b ? "yes" : "no"; };
  std::cout << "tessera " << j["tessera"].get<std::string>() << "\n"
            << "  libtorch          " << j["libtorch"].get<std::string>() << "\n"
            << "  cuda kernels      " << yes(j["cuda"]["kernels_built"]) << "\n"
            << "  cuda device       "
            << (j["cuda"]["device_available"].get<bool>() ? j["cuda"]["device_name"].get<std::string>() : "none")
            << "\n"
            << "  cpu attention     " << j["cpu"]["attention_isa"].get<std::string>() << ", "
            << j["cpu"]["torch_threads"].get<int>() << " threads (" << j["cpu"]["hardware_threads"].get<unsigned>()
            << " hardware)\n"
            << "  io libraries built in:\n";
  for (auto& [name, found] : j["libraries"].items()) std::cout << "    " << name << ": " << yes(found) << "\n";
  std::cout << "  --report viewers  " << yes(j["report_viewers"]) << "\n";
}

}  // namespace

void add_doctor(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("doctor", "Report what this build contains and what the machine offers");
  auto* json = cmd->add_flag("--json", "Print one JSON object instead of text");
  struct Explain {
    std::string call;
    std::vector<std::string> sets;
    int arch = 0;
  };
  auto e = std::make_shared<Explain>();
  auto* explain = cmd->add_option("--explain-attention", e->call,
                                  "Which CUDA attention kernels a call described in words runs, and why, e.g. "
                                  "\"dtype=bf16 d=64 nq=197 nk=197 causal bias\" (words: docs/attention.md)");
  cmd->add_option("--arch", e->arch, "With --explain-attention: compute capability x 10 (80, 90; default this device)")
      ->check(CLI::Range(0, 200));
  cmd->add_option("--set", e->sets, "With --explain-attention: a kernel override NAME=VALUE (repeatable)");
  cmd->callback([cmd, json, explain, e, &exit_code] {
    (void)cmd;
    if (*explain) {
      std::cout << tessera::attention::explain_cuda_dispatch(e->call, e->sets, e->arch);
      exit_code = kOk;
      return;
    }
    const nlohmann::json j = collect();
    if (*json) std::cout << j.dump(2) << "\n";
    else print_text(j);
    exit_code = kOk;
  });
}

}  // namespace tessera::apps
