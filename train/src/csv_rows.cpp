#include "csv_rows.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tessera::train {

std::vector<std::string> split_cells(const std::string& line, char separator) {
  std::vector<std::string> cells;
  std::stringstream ss(line);
  std::string c;
  while (std::getline(ss, c, separator)) {
    while (!c.empty() && (c.back() == '\r' || c.back() == ' ')) c.pop_back();
    while (!c.empty() && c.front() == ' ') c.erase(c.begin());
    cells.push_back(c);
  }
  return cells;
}

std::vector<std::map<std::string, std::string>> read_csv_rows(const std::string& path,
                                                               const std::vector<std::string>& required) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::string line;
  if (!std::getline(in, line)) throw std::runtime_error(path + ": empty CSV");
  const auto header = split_cells(line, ',');
  for (const auto& r : required) {
    bool found = false;
    for (const auto& h : header) found = found || h == r;
    if (!found) {
      std::string names;
      for (const auto& q : required) names += (names.empty() ? "`" : ", `") + q + "`";
      throw std::runtime_error(path + ": the header must name columns " + names);
    }
  }
  std::vector<std::map<std::string, std::string>> rows;
  for (int row = 2; std::getline(in, line); ++row) {
    if (line.find_first_not_of(" \r") == std::string::npos) continue;
    const auto cells = split_cells(line, ',');
    if (cells.size() < header.size())
      throw std::runtime_error(path + ": row " + std::to_string(row) + " has " + std::to_string(cells.size()) +
                               " cells, the header " + std::to_string(header.size()));
    std::map<std::string, std::string> m;
    for (size_t i = 0; i < header.size(); ++i) m[header[i]] = cells[i];
    rows.push_back(std::move(m));
  }
  if (rows.empty()) throw std::runtime_error(path + ": no rows");
  return rows;
}

}  // namespace tessera::train
