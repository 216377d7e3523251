#include "tessera/io/table_writer.h"

#if TESSERA_IO_HAS_JSON
#include <nlohmann/json.hpp>
#endif

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "tessera/io/atomic_file.h"

namespace tessera::io {
namespace {

std::string csv_field(const Cell& c) {
  if (const auto* i = std::get_if<std::int64_t>(&c)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&c)) {
    if (!std::isfinite(*d)) return std::isnan(*d) ? "nan" : (*d > 0 ? "inf" : "-inf");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", *d);  // round-trips a double exactly
    return buf;
  }
  const std::string& s = std::get<std::string>(c);
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) {
    if (ch == '"') q += '"';
    q += ch;
  }
  return q + "\"";
}

void check_width(const Table& t) {
  for (std::size_t r = 0; r < t.rows.size(); ++r)
    if (t.rows[r].size() != t.columns.size())
      throw std::invalid_argument("table row " + std::to_string(r) + " has " + std::to_string(t.rows[r].size()) +
                                  " cells for " + std::to_string(t.columns.size()) + " columns");
}

}  // namespace

void Table::add_row(std::vector<Cell> row) {
  if (row.size() != columns.size())
    throw std::invalid_argument("table row has " + std::to_string(row.size()) + " cells for " +
                                std::to_string(columns.size()) + " columns");
  rows.push_back(std::move(row));
}

std::string to_csv(const Table& t) {
  check_width(t);
  std::string out;
  for (std::size_t c = 0; c < t.columns.size(); ++c) out += (c ? "," : "") + csv_field(Cell(t.columns[c]));
  out += "\n";
  for (const auto& row : t.rows) {
    for (std::size_t c = 0; c < row.size(); ++c) out += (c ? "," : "") + csv_field(row[c]);
    out += "\n";
  }
  return out;
}

std::string to_json(const Table& t, int indent) {
  check_width(t);
#if !TESSERA_IO_HAS_JSON
  (void)indent;
  throw std::runtime_error("JSON tables need nlohmann-json, which this build lacks");
#else
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& row : t.rows) {
    nlohmann::json obj = nlohmann::json::object();
    for (std::size_t c = 0; c < row.size(); ++c)
      std::visit([&](const auto& v) { obj[t.columns[c]] = v; }, row[c]);
    arr.push_back(std::move(obj));
  }
  return arr.dump(indent) + "\n";
#endif
}

void write_csv(const std::string& path, const Table& t) {
  std::string text;
  try {
    text = to_csv(t);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
  write_file_atomically(path, text);
}

void write_json(const std::string& path, const Table& t) {
  std::string text;
  try {
    text = to_json(t);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
  write_file_atomically(path, text);
}

}  // namespace tessera::io
