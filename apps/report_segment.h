// `segment --report`: the input volume with its label map in NiiVue, legend with volumes and Dice.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>

#include "tessera/io/volume.h"

namespace tessera::apps::report {

// `summary` is segment's *_volumes.json content; `window` the CT window (HU) the image is shown in.
void write_segment_report(const std::string& page, const io::Volume& image, const io::Volume& labels,
                          const nlohmann::json& summary, const std::optional<std::pair<double, double>>& window);

}  // namespace tessera::apps::report
