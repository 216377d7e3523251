#include "class_index.h"

#include <stdexcept>

namespace tessera::train {

int64_t class_index(const std::string& value, const std::vector<std::string>& classes, const std::string& where) {
  for (size_t i = 0; i < classes.size(); ++i)
    if (classes[i] == value) return int64_t(i);
  try {
    size_t used = 0;
    const long long i = std::stoll(value, &used);
    if (used == value.size() && i >= 0 && i < (long long)classes.size()) return i;
  } catch (const std::exception&) {
  }
  throw std::runtime_error(where + ": label `" + value + "` is neither a class name nor an index below " +
                           std::to_string(classes.size()));
}

}  // namespace tessera::train
