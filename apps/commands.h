// Each subcommand registers itself on the CLI11 app and returns the
// callback's exit code through a shared slot.
#pragma once

#include <CLI/CLI.hpp>

namespace tessera::apps {

// Exit codes that mean something to scripts.
enum ExitCode : int {
  kOk = 0,
  kFailure = 1,     // the work failed (a bad input file, a runtime error)
  kUsage = 2,       // wrong command-line arguments
};

void add_doctor(CLI::App& app, int& exit_code);
void add_info(CLI::App& app, int& exit_code);
void add_convert(CLI::App& app, int& exit_code);
void add_make_samples(CLI::App& app, int& exit_code);
void add_embed_wsi(CLI::App& app, int& exit_code);
void add_video(CLI::App& app, int& exit_code);
void add_segment(CLI::App& app, int& exit_code);
void add_bench(CLI::App& app, int& exit_code);
void add_train(CLI::App& app, int& exit_code);
void add_collect(CLI::App& app, int& exit_code);

}  // namespace tessera::apps
