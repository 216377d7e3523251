// Helpers shared by the io tests: a scratch folder per test, the shared
// sample data folder, and an assertion that an error names the file.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace tessera::io::test {

// A fresh folder under the system temp dir, removed when the object dies.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// ../shared/data, or "" when that folder is absent (tests then GTEST_SKIP).
std::string shared_data(const std::string& name);

void write_bytes(const std::string& path, const std::string& bytes);
std::string read_bytes(const std::string& path);
// The first n bytes of src copied to dst (a truncated file).
void write_truncated_copy(const std::string& src, const std::string& dst, std::size_t n);

// Runs f, expects a std::exception whose message contains `path` and is one
// line; returns the message for further checks.
std::string expect_error_naming(const std::function<void()>& f, const std::string& path);

}  // namespace tessera::io::test

#define TESSERA_SKIP_WITHOUT(feature)                                     \
  do {                                                                    \
    if (!(feature)) GTEST_SKIP() << #feature " not built into tessera_io"; \
  } while (0)
