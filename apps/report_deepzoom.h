// A Deep Zoom pyramid of a slide (the layout OpenSeadragon and openslide's deepzoom read):
// DIR/NAME.dzi and DIR/NAME_files/<level>/<col>_<row>.jpeg, each tile read from the OpenSlide level
// nearest below its scale and resized.
#pragma once

#include <string>

#include "tessera/io/slide.h"

namespace tessera::apps::report {

struct DeepZoomOptions {
  int tile_size = 254;  // plus the overlap on inner edges: 256-px tiles, as openslide's deepzoom
  int overlap = 1;
  int jpeg_quality = 80;
  bool quiet = false;
};

void write_deep_zoom(const io::Slide& slide, const std::string& dir, const std::string& name, const DeepZoomOptions& opts = {});

}  // namespace tessera::apps::report
