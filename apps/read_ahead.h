// The input after the current one, prepared on its own thread while the current one is processed
// (batch::Job::upcoming tells which): segment reads the next volume, embed-wsi opens the next slide.
#pragma once

#include <future>
#include <map>
#include <string>
#include <utility>

namespace tessera::apps {

template <class T>
class ReadAhead {
 public:
  // Starts make() for `key` on its own thread, unless it is already under way; `key` becomes the latest.
  template <class F>
  void start(const std::string& key, F&& make) {
    latest_ = key;
    if (!ahead_.count(key)) ahead_.emplace(key, std::async(std::launch::async, std::forward<F>(make)));
  }

  // The result for `key`: the one started ahead, else make() deferred to the caller. Every other item but
  // the latest is dropped (inputs another worker took), so at most this one and the next are held.
  template <class F>
  std::future<T> take(const std::string& key, F&& make) {
    std::future<T> out;
    if (const auto found = ahead_.find(key); found != ahead_.end()) out = std::move(found->second);
    else out = std::async(std::launch::deferred, std::forward<F>(make));
    for (auto e = ahead_.begin(); e != ahead_.end();) e = e->first == latest_ && e->first != key ? std::next(e) : ahead_.erase(e);
    return out;
  }

 private:
  std::map<std::string, std::future<T>> ahead_;
  std::string latest_;
};

}  // namespace tessera::apps
