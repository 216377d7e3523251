#include "io_test_util.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace tessera::io::test {

namespace fs = std::filesystem;

ScratchDir::ScratchDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "io_test";
  path_ = (fs::temp_directory_path() / ("tessera_io_" + name + "_" + std::to_string(::getpid()))).string();
  fs::remove_all(path_);
  fs::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string shared_data(const std::string& name) {
  const std::string dir = TESSERA_SHARED_DATA;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "";
  const std::string p = dir + "/" + name;
  return fs::exists(p, ec) ? p : "";
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_truncated_copy(const std::string& src, const std::string& dst, std::size_t n) {
  write_bytes(dst, read_bytes(src).substr(0, n));
}

std::string expect_error_naming(const std::function<void()>& f, const std::string& path) {
  try {
    f();
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << "error does not name " << path << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "error is not one line: " << msg;
    return msg;
  }
  ADD_FAILURE() << "no error for " << path;
  return "";
}

}  // namespace tessera::io::test
