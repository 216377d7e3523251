// `tessera make-samples DIR`: writes the project's own sample data (nothing
// is downloaded): a CT phantom with labels (NIfTI and DICOM), a pyramidal
// slide readable by OpenSlide, an endoscopy-like video with phase labels,
// and manifest.json stating what each file is and the facts tests rely on.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>
#include <algorithm>
#include <array>
#include <set>
#include <vector>

#include "commands.h"
#include "tessera/io/atomic_file.h"
#include "tessera/io/cores.h"
#include "tessera/io/ct_phantom.h"
#include "tessera/io/dicom_series.h"
#include "tessera/io/features.h"
#include "tessera/io/pyramid_tiff.h"
#include "tessera/io/samples.h"
#include "tessera/io/volume_io.h"

namespace tessera::apps {

namespace {

namespace fs = std::filesystem;
namespace tio = tessera::io;
using nlohmann::json;

// Sizes, from --ct-size / --slide-size (tests and cluster dry runs want tiny ones).
std::array<std::int64_t, 3> g_ct_size = {160, 128, 64};  // large enough for a 96^3 sliding window
std::array<int, 2> g_slide_size = {3072, 2304};
tio::SampleVideoOptions g_video;  // --video-size / --video-seconds / --video-fps / --video-codec

std::string size_text(const std::vector<std::int64_t>& v) {
  std::string s;
  for (auto x : v) s += (s.empty() ? "" : "x") + std::to_string(x);
  return s;
}

json make_ct(const std::string& dir) {
  tio::CtPhantomOptions opt;
  opt.size = g_ct_size;
  const tio::CtPhantom p = tio::make_ct_phantom(opt);
  tio::write_volume(dir + "/ct_phantom.nii.gz", p.ct);
  tio::write_volume(dir + "/ct_phantom_labels.nii.gz", p.labels);
  // DICOM version of the same CT; replace an earlier one we wrote.
  const std::string dcm = dir + "/ct_phantom_dicom";
  std::error_code ec;
  if (fs::is_directory(dcm, ec)) {
    for (const auto& e : fs::directory_iterator(dcm))
      if (e.path().extension() != ".dcm")
        throw std::runtime_error(dcm + ": exists and holds files other than DICOM slices; move it away first");
    fs::remove_all(dcm, ec);
  }
  tio::write_dicom_series(dcm, p.ct, "tessera CT phantom");
  // Per-label voxel counts and volumes, the numbers `segment` should reproduce.
  std::vector<std::int64_t> count(256, 0);
  const auto* lab = p.labels.data<std::uint8_t>();
  for (std::int64_t i = 0; i < p.labels.geometry.voxel_count(); ++i) ++count[lab[i]];
  const auto& sp = p.ct.geometry.spacing;
  const double voxel_ml = sp[0] * sp[1] * sp[2] / 1000.0;
  tio::Table t;
  t.columns = {"label", "name", "hu", "voxels", "volume_ml"};
  for (const auto& o : p.organs)
    if (o.label > 0) t.add_row({std::int64_t{o.label}, o.name, o.hu, count[o.label], count[o.label] * voxel_ml});
  tio::write_csv(dir + "/ct_phantom_labels.csv", t);
  return {{"ct_phantom.nii.gz", "synthetic abdominal CT, " + size_text({g_ct_size[0], g_ct_size[1], g_ct_size[2]}) +
                                    " voxels, int16 HU, oblique direction, spacing 0.9x0.9x2.5 mm"},
          {"ct_phantom_labels.nii.gz", "its label map (uint8), same geometry"},
          {"ct_phantom_labels.csv", "label ids, names, HU and volumes"},
          {"ct_phantom_dicom", "the same CT as a DICOM series (one file per slice)"}};
}

json make_slide(const std::string& dir) {
  // Drawn tile by tile: a benchmark slide of 100,000 tiles is larger than memory.
  const tio::SampleSlide slide(g_slide_size[0], g_slide_size[1]);
  tio::PyramidTiffOptions o;
  o.mpp = 0.5;
  o.objective_power = 20;
  o.tile_size = 256;
  o.min_level_size = 512;
  o.threads = io::usable_cores();
  tio::write_pyramid_tiff(dir + "/slide.svs", slide.width(), slide.height(),
                          [&slide](int scale, int x, int y, int w, int h, std::uint8_t* rgb) { slide.render(scale, x, y, w, h, rgb); }, o);
  return {{"slide.svs", "pyramidal tiled TIFF (Aperio layout), " + size_text({g_slide_size[0], g_slide_size[1]}) +
                            " at 0.5 um/px, 20x, levels 1/2/4 (down to 512 px)"}};
}

json make_video(const std::string& dir) {
  tio::SampleVideoOptions o = g_video;
  // Past a minute, one minute is drawn and encoded, then repeated: an hour costs a minute's encoding.
  if (o.seconds > 60 && o.seconds % 60 == 0) o.segment_seconds = 60;
  const tio::Table labels = tio::write_sample_video(dir + "/endoscopy.mp4", o);
  tio::write_csv(dir + "/endoscopy_phases.csv", labels);
  const std::string codec = o.codec == "mpeg4" ? "MPEG-4 Part 2" : o.codec == "libx264" ? "H.264" : o.codec;
  return {{"endoscopy.mp4", "synthetic endoscopy clip, " + std::to_string(o.width) + "x" + std::to_string(o.height) + ", " +
                                std::to_string(o.fps) + " fps, " + std::to_string(o.seconds) + " s, " + codec +
                                (o.segment_seconds > 0 ? " (a 60 s segment repeated)" : "")},
          {"endoscopy_phases.csv", "phase label for every second of endoscopy.mp4"}};
}

}  // namespace

void add_make_samples(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("make-samples", "Write the project's synthetic sample data into a folder");
  auto dir = std::make_shared<std::string>();
  auto only = std::make_shared<std::vector<std::string>>();
  cmd->add_option("dir", *dir, "Output folder (created if needed)")->required();
  cmd->add_option("--only", *only, "Make only these: ct, slide, video")
      ->check(CLI::IsMember({"ct", "slide", "video"}));
  auto ct_size = std::make_shared<std::vector<std::int64_t>>(g_ct_size.begin(), g_ct_size.end());
  auto slide_size = std::make_shared<std::vector<int>>(g_slide_size.begin(), g_slide_size.end());
  cmd->add_option("--ct-size", *ct_size, "CT phantom size in voxels (x y z)")->expected(3)->capture_default_str()->check(CLI::Range(16, 1024));
  cmd->add_option("--slide-size", *slide_size, "Slide level-0 size in pixels (width height)")
      ->expected(2)
      ->capture_default_str()
      ->check(CLI::Range(256, 200000));
  auto video_size = std::make_shared<std::vector<int>>(std::vector<int>{g_video.width, g_video.height});
  cmd->add_option("--video-size", *video_size, "Video frame size in pixels (width height, even)")
      ->expected(2)
      ->capture_default_str()
      ->check(CLI::Range(16, 7680));
  cmd->add_option("--video-seconds", g_video.seconds,
                  "Video length in seconds (past 60 s: a whole number of minutes, one minute drawn and repeated)")
      ->capture_default_str()
      ->check(CLI::Range(4, 24 * 3600));
  cmd->add_option("--video-fps", g_video.fps, "Video frame rate")->capture_default_str()->check(CLI::Range(1, 240));
  cmd->add_option("--video-codec", g_video.codec, "FFmpeg encoder of the video: mpeg4, libx264 (H.264), ...")->capture_default_str();
  cmd->callback([dir, only, ct_size, slide_size, video_size, &exit_code] {
    g_video.width = (*video_size)[0];
    g_video.height = (*video_size)[1];
    if (g_video.width % 2 || g_video.height % 2) throw CLI::ValidationError("--video-size", "width and height must be even (4:2:0 chroma)");
    if (g_video.seconds > 60 && g_video.seconds % 60)
      throw CLI::ValidationError("--video-seconds", "past 60 s, give a whole number of minutes (one minute is repeated)");
    g_ct_size = {(*ct_size)[0], (*ct_size)[1], (*ct_size)[2]};
    g_slide_size = {(*slide_size)[0], (*slide_size)[1]};
    std::error_code ec;
    fs::create_directories(*dir, ec);
    if (ec) throw std::runtime_error(*dir + ": cannot create folder: " + ec.message());
    const std::set<std::string> want(only->begin(), only->end());
    auto wanted = [&](const char* what) { return want.empty() || want.count(what) > 0; };
    const auto built = tio::built_features();
    json manifest = json::object();
    bool all_done = true;
    auto part = [&](const char* what, bool can, const char* needs, json (*make)(const std::string&)) {
      if (!wanted(what)) return;
      if (!can) {
        std::cerr << "tessera: " << what << " sample skipped: this build lacks " << needs << "\n";
        all_done = false;
        return;
      }
      const json made = make(*dir);  // named: items() of a temporary would dangle
      for (auto& [k, v] : made.items()) manifest[k] = v;
      std::cout << "made " << what << " sample in " << *dir << "\n";
    };
    part("ct", built.itk, "ITK", make_ct);
    part("slide", built.tiff, "libtiff", make_slide);
    part("video", built.ffmpeg, "FFmpeg", make_video);
    tio::write_file_atomically(*dir + "/manifest.json", manifest.dump(2) + "\n");
    exit_code = all_done ? kOk : kFailure;
  });
}

}  // namespace tessera::apps
