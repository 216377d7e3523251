// A label cell (a class name, or its index) -> the class index; shared by the
// bag manifests, per-token label CSVs and frame-level phase annotations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::train {

// Throws naming `where` (a file, or a file and line) when `value` is neither a name in `classes` nor an index below its size.
int64_t class_index(const std::string& value, const std::vector<std::string>& classes, const std::string& where);

}  // namespace tessera::train
