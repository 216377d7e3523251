// tessera: segment scans, embed slides and analyse video with exact fused
// attention. Subcommands live in cmd_*.cpp; errors become one line on stderr.
#include <ATen/Parallel.h>

#include <cstdio>
#include <cstdlib>

#include <exception>
#include <iostream>

#include "commands.h"
#include "tessera/io/cores.h"

int main(int argc, char** argv) {
  // LibTorch counts physical cores and may settle on 1 on a 2-vCPU machine; use every hardware thread this
  // process may run on (a job's cpuset, not the node's) unless OMP_NUM_THREADS says otherwise.
  if (!std::getenv("OMP_NUM_THREADS")) at::set_num_threads(tessera::io::usable_cores());
  CLI::App app{"tessera: long-sequence vision transformers on exact fused attention"};
  app.set_version_flag("--version", std::string("tessera ") + TESSERA_VERSION);
  app.require_subcommand(1);
  // Usage errors are one line like the others (CLI11 adds a "Run with --help" line).
  app.failure_message([](const CLI::App*, const CLI::Error& e) { return std::string("tessera: error: ") + e.what() + "\n"; });
  int exit_code = tessera::apps::kOk;
  tessera::apps::add_doctor(app, exit_code);
  tessera::apps::add_info(app, exit_code);
  tessera::apps::add_convert(app, exit_code);
  tessera::apps::add_make_samples(app, exit_code);
#ifdef TESSERA_APP_SEGMENT
  tessera::apps::add_segment(app, exit_code);
#endif
#ifdef TESSERA_APP_EMBED_WSI
  tessera::apps::add_embed_wsi(app, exit_code);
#endif
#ifdef TESSERA_APP_VIDEO
  tessera::apps::add_video(app, exit_code);
#endif
  tessera::apps::add_collect(app, exit_code);
#ifdef TESSERA_APP_BENCH
  tessera::apps::add_bench(app, exit_code);
#endif
#ifdef TESSERA_APP_TRAIN
  tessera::apps::add_train(app, exit_code);
#endif
  // Set after the subcommands exist: CLI11 copies the parent's footer into subcommands made later.
  app.footer(
      "Examples:\n"
      "  tessera doctor                                    what this build has and sees\n"
      "  tessera make-samples data_samples/generated       sample CT, slide and video\n"
      "  tessera info scan.nii.gz                          what the readers find\n"
      "  tessera convert model.pt -o model.safetensors     a PyTorch checkpoint as safetensors\n"
      "  tessera segment ct.nii.gz -o mask.nii.gz --model configs/swin_unetr_btcv.yaml --weights w.safetensors\n"
      "  tessera embed-wsi slide.svs -o out/ --model configs/vit_b16.yaml --weights vit.safetensors\n"
      "  tessera video case.mp4 -o out/ --model configs/videomae_base.yaml --weights videomae.safetensors\n"
      "  tessera collect out/                              a batch run's task summaries: done, failed, missing\n"
      "  tessera bench --quick                             attention and models vs LibTorch's attention\n"
      "Run 'tessera COMMAND --help' for a command's options.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : tessera::apps::kUsage;
  } catch (const std::exception& e) {
    // One line: LibTorch's errors append a backtrace after the first newline.
    const std::string what = e.what();
    std::cerr << "tessera: error: " << what.substr(0, what.find('\n')) << "\n";
    return tessera::apps::kFailure;
  }
  // The process ends without static destructors: LibTorch's and CUDA's teardown would lengthen every run, and
  // nothing of ours needs it (a command closes its outputs before returning; the streams are flushed here).
  std::cout.flush();
  std::fflush(nullptr);
  std::_Exit(exit_code);
}
