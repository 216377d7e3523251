#include "tessera/io/slide.h"

#include <openslide/openslide.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "log.h"

namespace tessera::io {

struct Slide::Handle {
  openslide_t* osr = nullptr;
  ~Handle() {
    if (osr) openslide_close(osr);
  }
};

namespace {

namespace fs = std::filesystem;

double parse_positive(const std::string& s) {
  if (s.empty()) return 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  return (end != s.c_str() && std::isfinite(v) && v > 0) ? v : 0;
}

std::string prop(const std::map<std::string, std::string>& p, const std::string& key) {
  const auto it = p.find(key);
  return it == p.end() ? "" : it->second;
}

// mpp in order of trust: OpenSlide's own properties, the TIFF resolution
// tags (OpenSlide 3.4's generic-tiff does not turn them into mpp; 4.0 does),
// the caller's fallback, then 10 / objective power (the convention Trident
// and TIAToolbox use), else unknown. Everything but the first warns.
void resolve_mpp(SlideInfo& info, double fallback) {
  const auto& p = info.properties;
  info.mpp_x = parse_positive(prop(p, "openslide.mpp-x"));
  info.mpp_y = parse_positive(prop(p, "openslide.mpp-y"));
  if (info.mpp_x > 0 && info.mpp_y > 0) {
    info.mpp_source = "openslide.mpp";
    return;
  }
  const double xres = parse_positive(prop(p, "tiff.XResolution"));
  const double yres = parse_positive(prop(p, "tiff.YResolution"));
  const std::string unit = prop(p, "tiff.ResolutionUnit");
  const double per = unit == "centimeter" ? 1e4 : unit == "inch" ? 25400.0 : 0;
  if (xres > 0 && yres > 0 && per > 0) {
    info.mpp_x = per / xres;
    info.mpp_y = per / yres;
    info.mpp_source = "tiff.XResolution";
    detail::warn(info.path + ": no openslide.mpp-x; using the TIFF resolution tags (" + std::to_string(info.mpp_x) +
                 " um/px)");
    return;
  }
  if (fallback > 0) {
    info.mpp_x = info.mpp_y = fallback;
    info.mpp_source = "fallback";
    detail::warn(info.path + ": slide has no mpp; using the given fallback " + std::to_string(fallback) + " um/px");
    return;
  }
  if (info.objective_power > 0) {
    info.mpp_x = info.mpp_y = 10.0 / info.objective_power;
    info.mpp_source = "objective-power";
    detail::warn(info.path + ": slide has no mpp; guessing " + std::to_string(info.mpp_x) + " um/px from objective power " +
                 std::to_string(info.objective_power) + "x");
    return;
  }
  info.mpp_x = info.mpp_y = 0;
  info.mpp_source = "unknown";
  detail::warn(info.path + ": slide has no mpp and no objective power; give one explicitly to tile at a target mpp");
}

}  // namespace

Slide::Slide(const std::string& path, const SlideOpenOptions& options) : h_(std::make_unique<Handle>()) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw std::runtime_error(path + ": no such file or folder");
  if (fs::is_regular_file(path, ec) && fs::file_size(path, ec) == 0) throw std::runtime_error(path + ": file is empty");
  const char* vendor = openslide_detect_vendor(path.c_str());
  h_->osr = openslide_open(path.c_str());
  if (!h_->osr) throw std::runtime_error(path + ": not a slide format OpenSlide recognises");
  if (const char* err = openslide_get_error(h_->osr))
    throw std::runtime_error(path + ": cannot open slide: " + err);
  info_.path = path;
  info_.vendor = vendor ? vendor : "";
  const int32_t n = openslide_get_level_count(h_->osr);
  if (n <= 0) throw std::runtime_error(path + ": slide has no levels");
  for (int32_t l = 0; l < n; ++l) {
    SlideLevel lv;
    openslide_get_level_dimensions(h_->osr, l, &lv.width, &lv.height);
    lv.downsample = openslide_get_level_downsample(h_->osr, l);
    if (lv.width <= 0 || lv.height <= 0 || !(lv.downsample > 0))
      throw std::runtime_error(path + ": level " + std::to_string(l) + " has no valid dimensions");
    info_.levels.push_back(lv);
  }
  if (const char* const* names = openslide_get_property_names(h_->osr))
    for (; *names; ++names) {
      const char* v = openslide_get_property_value(h_->osr, *names);
      info_.properties[*names] = v ? v : "";
    }
  if (const char* const* names = openslide_get_associated_image_names(h_->osr))
    for (; *names; ++names) info_.associated.emplace_back(*names);
  if (info_.vendor.empty()) info_.vendor = prop(info_.properties, "openslide.vendor");
  info_.objective_power = parse_positive(prop(info_.properties, "openslide.objective-power"));
  resolve_mpp(info_, options.fallback_mpp);
  if (const char* err = openslide_get_error(h_->osr))
    throw std::runtime_error(path + ": cannot read slide metadata: " + err);
}

Slide::~Slide() = default;
Slide::Slide(Slide&&) noexcept = default;
Slide& Slide::operator=(Slide&&) noexcept = default;

double Slide::level_mpp(int level) const {
  if (level < 0 || level >= level_count())
    throw std::out_of_range(info_.path + ": level " + std::to_string(level) + " does not exist (slide has " +
                            std::to_string(level_count()) + ")");
  return info_.mpp_x * info_.levels[static_cast<std::size_t>(level)].downsample;
}

RgbImage Slide::read_region(std::int64_t x, std::int64_t y, int level, std::int64_t w, std::int64_t h) const {
  if (level < 0 || level >= level_count())
    throw std::out_of_range(info_.path + ": level " + std::to_string(level) + " does not exist (slide has " +
                            std::to_string(level_count()) + ")");
  // One region is a tile or a thumbnail; 2^28 pixels (1 GiB of ARGB) is far past both.
  if (w <= 0 || h <= 0 || w > (1 << 20) || h > (1 << 20) || w * h > (std::int64_t{1} << 28))
    throw std::invalid_argument(info_.path + ": region " + std::to_string(w) + "x" + std::to_string(h) +
                                " is empty or too large to read at once");
  std::vector<std::uint32_t> argb(static_cast<std::size_t>(w * h));
  openslide_read_region(h_->osr, argb.data(), x, y, level, w, h);
  if (const char* err = openslide_get_error(h_->osr))
    throw std::runtime_error(info_.path + ": cannot read region: " + err);
  RgbImage out(static_cast<int>(w), static_cast<int>(h));
  premultiplied_argb_to_rgb(argb.data(), argb.size(), out.rgb.data());
  return out;
}

int Slide::best_level_for_mpp(double target_mpp) const {
  if (!(target_mpp > 0)) throw std::invalid_argument(info_.path + ": target mpp must be positive");
  if (!(info_.mpp_x > 0))
    throw std::runtime_error(info_.path + ": slide mpp is unknown; cannot pick a level for " +
                             std::to_string(target_mpp) + " um/px (give a fallback mpp)");
  int best = 0;
  for (int l = 0; l < level_count(); ++l)
    if (level_mpp(l) <= target_mpp * 1.1) best = l;
  return best;
}

RgbImage Slide::read_associated(const std::string& name) const {
  int64_t w = -1, h = -1;
  openslide_get_associated_image_dimensions(h_->osr, name.c_str(), &w, &h);
  if (w <= 0 || h <= 0) throw std::runtime_error(info_.path + ": no associated image '" + name + "'");
  std::vector<std::uint32_t> argb(static_cast<std::size_t>(w * h));
  openslide_read_associated_image(h_->osr, name.c_str(), argb.data());
  if (const char* err = openslide_get_error(h_->osr))
    throw std::runtime_error(info_.path + ": cannot read associated image '" + name + "': " + err);
  RgbImage out(static_cast<int>(w), static_cast<int>(h));
  premultiplied_argb_to_rgb(argb.data(), argb.size(), out.rgb.data());
  return out;
}

}  // namespace tessera::io
