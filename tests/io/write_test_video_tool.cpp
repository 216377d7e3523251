// Writes the awkward videos the CLI tests feed to `tessera video`
// (tests/cli/video_bad_input_test.sh), through the io layer's writer:
//   vfr OUT.mp4      2 s: 30 frames in the first second, 5 in the second (pts in ms)
//   rotated OUT.mp4  96x64 coded, display rotation 90 (counter-clockwise); left half red, right half blue
//   coded OUT.mp4    the same pixels without the rotation
//   upright OUT.mp4  64x96: the rotated video's picture as displayed (blue on top, red below)
//   clockwise OUT.mp4  64x96: the picture turned the wrong way (red on top, blue below)
//   long OUT.mkv     4 s at 10 fps, 64x64, a moving bar: to be cut short by the test
//   phases OUT.mp4 N0 N1 ... N6   25 fps, 64x64: N0 frames of Cholec80's first phase, N1 of the second ...
//                    (0 skips a phase), each phase its own colour under a moving bar; and beside it
//                    OUT-phase.txt, the annotation in Cholec80's format (Frame<TAB>Phase, a row per frame)
//                    (tests/cli/phase_recipe_test.sh)
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "tessera/io/video.h"

namespace {

using tessera::io::RgbImage;

void fill(RgbImage& img, int x0, int y0, int x1, int y1, uint8_t r, uint8_t g, uint8_t b) {
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) {
      uint8_t* p = img.pixel(x, y);
      p[0] = r, p[1] = g, p[2] = b;
    }
}

// Red and blue halves: red left and blue right, or (upright) blue on top and red below, or the reverse.
RgbImage halves(int w, int h, bool upright, bool blue_on_top = true) {
  RgbImage img(w, h);
  if (upright) {
    const uint8_t top = blue_on_top ? 20 : 230, bottom = blue_on_top ? 230 : 20;
    fill(img, 0, 0, w, h / 2, top, 20, uint8_t(250 - top));
    fill(img, 0, h / 2, w, h, bottom, 20, uint8_t(250 - bottom));
  } else {
    fill(img, 0, 0, w / 2, h, 230, 20, 20);
    fill(img, w / 2, 0, w, h, 20, 20, 230);
  }
  return img;
}

void write(const std::string& path, int w, int h, int fps, int time_base_den, double rotation, int frames,
           const std::function<RgbImage(int)>& frame, const std::function<int64_t(int)>& pts) {
  tessera::io::VideoWriteOptions o;
  o.width = w;
  o.height = h;
  o.fps = fps;
  o.time_base_den = time_base_den;
  o.rotation_degrees = rotation;
  o.bit_rate = 4'000'000;
  tessera::io::VideoWriter writer(path, o);
  for (int i = 0; i < frames; ++i) writer.add_frame(frame(i), pts(i));
  writer.finish();
}

const char* const kCholec80Phases[] = {"Preparation",           "CalotTriangleDissection", "ClippingCutting",
                                       "GallbladderDissection", "GallbladderPackaging",    "CleaningCoagulation",
                                       "GallbladderRetraction"};
const uint8_t kPhaseColours[7][3] = {{200, 40, 40}, {40, 180, 40}, {40, 40, 200}, {200, 200, 40}, {200, 40, 200}, {40, 200, 200}, {120, 120, 120}};

// Frames of phase k for counts[k] frames each, in order; the annotation beside OUT.
int write_phases(const std::string& out, const std::vector<int>& counts) {
  std::vector<int> phase_of;
  for (size_t k = 0; k < counts.size(); ++k) phase_of.insert(phase_of.end(), size_t(counts[k]), int(k));
  std::ofstream txt(out.substr(0, out.rfind('.')) + "-phase.txt");
  txt << "Frame\tPhase\n";
  for (size_t f = 0; f < phase_of.size(); ++f) txt << f << "\t" << kCholec80Phases[phase_of[f]] << "\n";
  write(out, 64, 64, 25, 0, 0, int(phase_of.size()),
        [&](int i) {
          const uint8_t* c = kPhaseColours[phase_of[size_t(i)]];
          RgbImage img(64, 64);
          fill(img, 0, 0, 64, 64, c[0], c[1], c[2]);
          fill(img, (2 * i) % 56, 0, (2 * i) % 56 + 8, 64, 240, 240, 240);
          return img;
        },
        [](int) { return int64_t(-1); });
  return txt ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string kind = argc > 1 ? argv[1] : "";
  if (argc < 3 || (argc != 3 && kind != "phases") || (kind == "phases" && (argc < 4 || argc > 10))) {
    std::fprintf(stderr, "usage: write_test_video_tool vfr|rotated|coded|upright|clockwise|long OUT, or phases OUT N0 [N1 ... N6]\n");
    return 2;
  }
  const std::string out = argv[2];
  const auto next = [](int) { return int64_t(-1); };
  try {
    if (kind == "phases") {
      std::vector<int> counts;
      for (int i = 3; i < argc; ++i) counts.push_back(std::stoi(argv[i]));
      return write_phases(out, counts);
    } else if (kind == "vfr") {
      write(out, 64, 64, 17, 1000, 0, 35,
            [](int i) {
              RgbImage img(64, 64);
              fill(img, 0, 0, 64, 64, uint8_t(i * 7), 128, uint8_t(255 - i * 7));
              return img;
            },
            [](int i) { return i < 30 ? int64_t(i) * 1000 / 30 : 1000 + int64_t(i - 30) * 200; });
    } else if (kind == "rotated" || kind == "coded" || kind == "upright" || kind == "clockwise") {
      const bool upright = kind == "upright" || kind == "clockwise";
      const int w = upright ? 64 : 96, h = upright ? 96 : 64;
      write(out, w, h, 10, 0, kind == "rotated" ? 90.0 : 0.0, 10,
            [&](int) { return halves(w, h, upright, kind != "clockwise"); }, next);
    } else if (kind == "long") {
      write(out, 64, 64, 10, 0, 0, 40,
            [](int i) {
              RgbImage img(64, 64);
              fill(img, 0, 0, 64, 64, 40, 90, 40);
              fill(img, i % 56, 0, i % 56 + 8, 64, 240, 240, 240);
              return img;
            },
            next);
    } else {
      std::fprintf(stderr, "write_test_video_tool: unknown kind '%s'\n", kind.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_test_video_tool: %s\n", e.what());
    return 1;
  }
  return 0;
}
