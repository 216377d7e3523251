// A small CSV reader for dataset manifests: a header row, comma-separated
// cells (no quoting), blank lines skipped. Errors name the file and row.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace tessera::train {

// The cells of one line split at `separator`, each without surrounding spaces (and a trailing CR).
std::vector<std::string> split_cells(const std::string& line, char separator);

// Rows as column -> cell; throws when a `required` column is missing or a row is short.
std::vector<std::map<std::string, std::string>> read_csv_rows(const std::string& path,
                                                               const std::vector<std::string>& required);

}  // namespace tessera::train
