#include "tessera/io/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace tessera::io {

namespace {

void write_then_rename(const std::string& path, const std::string& tmp,
                       const std::function<void(const std::string&)>& write) {
  try {
    write(tmp);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw std::runtime_error(path + ": cannot move the finished file into place: " + why);
  }
}

}  // namespace

void write_atomically(const std::string& path, const std::function<void(const std::string&)>& write) {
  write_then_rename(path, path + ".tmp." + std::to_string(::getpid()), write);
}

std::string full_extension(const std::string& path) {
  const auto slash = path.find_last_of('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const auto dot = name.find_last_of('.');
  if (dot == std::string::npos || dot == 0) return "";
  std::string ext = name.substr(dot);
  if (ext == ".gz" || ext == ".bz2" || ext == ".xz") {
    const auto dot2 = name.find_last_of('.', dot - 1);
    if (dot2 != std::string::npos && dot2 != 0) ext = name.substr(dot2);
  }
  return ext;
}

void write_atomically_keeping_extension(const std::string& path,
                                        const std::function<void(const std::string&)>& write) {
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::string ext = full_extension(path);
  const std::string stem = name.substr(0, name.size() - ext.size());
  write_then_rename(path, dir + "." + stem + ".tmp." + std::to_string(::getpid()) + ext, write);
}

void write_file_atomically(const std::string& path, const std::string& content) {
  write_atomically(path, [&](const std::string& tmp) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(path + ": cannot open for writing: " + std::strerror(errno));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) throw std::runtime_error(path + ": write failed: " + std::strerror(errno));
  });
}

}  // namespace tessera::io
