// Writes the awkward videos the CLI tests feed to `tessera video`
// (tests/cli/video_bad_input_test.sh), through the io layer's writer:
//   vfr OUT.mp4      2 s: 30 frames in the first second, 5 in the second (pts in ms)
//   rotated OUT.mp4  96x64 coded, display rotation 90 (counter-clockwise); left half red, right half blue
//   coded OUT.mp4    the same pixels without the rotation
//   upright OUT.mp4  64x96: the rotated video's picture as displayed (blue on top, red below)
//   clockwise OUT.mp4  64x96: the picture turned the wrong way (red on top, blue below)
//   long OUT.mkv     4 s at 10 fps, 64x64, a moving bar: to be cut short by the test
#include <cstdio>
#include <exception>
#include <functional>
#include <string>

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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: write_test_video_tool vfr|rotated|coded|upright|clockwise|long OUT\n");
    return 2;
  }
  const std::string kind = argv[1], out = argv[2];
  const auto next = [](int) { return int64_t(-1); };
  try {
    if (kind == "vfr") {
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
