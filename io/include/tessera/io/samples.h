// Synthetic sample data the project makes itself (nothing is downloaded):
// a tissue-like slide image and an endoscopy-like video with phase labels.
// The CT phantom lives in ct_phantom.h.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/io/rgb_image.h"
#include "tessera/io/table_writer.h"

namespace tessera::io {

// H&E-like picture: white glass with a few irregular pink tissue islands,
// purple nuclei scattered inside them. Deterministic for a seed.
RgbImage make_sample_slide_image(int width, int height, std::uint32_t seed = 7);

struct SampleVideoOptions {
  int width = 320, height = 240;
  int fps = 25;
  int seconds = 12;
  std::uint32_t seed = 11;
};

// Writes an endoscopy-like clip (textured reddish tissue drifting slowly,
// grey instruments moving over it; which instruments appear depends on the
// surgical phase) and returns the per-second labels as a table with columns
// second, phase_id, phase. Needs FFmpeg.
Table write_sample_video(const std::string& path, const SampleVideoOptions& options = {});

}  // namespace tessera::io
