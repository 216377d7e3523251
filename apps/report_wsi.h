// `embed-wsi --report`: the slide in OpenSeadragon (a Deep Zoom pyramid beside the page), the tissue
// contour and tile grid as an overlay, and a heat map of per-tile scores when the run computed them.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "tessera/io/slide.h"
#include "tessera/patching/slide_tiling.h"

namespace tessera::apps::report {

struct TileScores {
  std::vector<float> scores;  // one per tile of the grid, in its order
  std::string title;          // what a score is
};

// `facts`: "pooling" (how the slide embedding was made) and "tissue_fraction".
void write_wsi_report(const std::string& page, const io::Slide& slide, const patching::TissueMask& tissue,
                      const patching::TileGrid& grid, const std::optional<TileScores>& heat, const nlohmann::json& facts,
                      bool quiet);

}  // namespace tessera::apps::report
