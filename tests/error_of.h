// The message of what a call throws, for tests that check error text.
#pragma once

#include <exception>
#include <functional>
#include <string>

namespace tessera::test_support {

// What `f` throws (its what()); "" when it throws nothing.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace tessera::test_support
