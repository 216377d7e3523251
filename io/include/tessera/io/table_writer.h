// Small result tables (per-label volumes, per-frame phases, tile lists) as
// CSV (RFC 4180 quoting) or JSON (an array of objects), written atomically.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace tessera::io {

using Cell = std::variant<std::string, std::int64_t, double>;

struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;  // each row has columns.size() cells

  void add_row(std::vector<Cell> row);  // throws when the width is wrong
};

std::string to_csv(const Table& t);
std::string to_json(const Table& t, int indent = 2);
void write_csv(const std::string& path, const Table& t);
void write_json(const std::string& path, const Table& t);

}  // namespace tessera::io
