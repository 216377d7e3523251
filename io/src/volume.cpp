#include "tessera/io/volume.h"

#include <cmath>
#include <stdexcept>

namespace tessera::io {

const char* pixel_type_name(PixelType t) {
  switch (t) {
    case PixelType::kUInt8: return "uint8";
    case PixelType::kInt8: return "int8";
    case PixelType::kUInt16: return "uint16";
    case PixelType::kInt16: return "int16";
    case PixelType::kUInt32: return "uint32";
    case PixelType::kInt32: return "int32";
    case PixelType::kFloat32: return "float32";
    case PixelType::kFloat64: return "float64";
  }
  return "unknown";
}

std::size_t pixel_type_size(PixelType t) {
  switch (t) {
    case PixelType::kUInt8:
    case PixelType::kInt8: return 1;
    case PixelType::kUInt16:
    case PixelType::kInt16: return 2;
    case PixelType::kUInt32:
    case PixelType::kInt32:
    case PixelType::kFloat32: return 4;
    case PixelType::kFloat64: return 8;
  }
  return 0;
}

Vec3 Geometry::index_to_physical(double i, double j, double k) const {
  const double s[3] = {i * spacing[0], j * spacing[1], k * spacing[2]};
  Vec3 p = origin;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) p[r] += direction[r][c] * s[c];
  return p;
}

bool Geometry::operator==(const Geometry& o) const {
  return size == o.size && spacing == o.spacing && origin == o.origin && direction == o.direction;
}

void throw_pixel_type_mismatch(const Volume& v, PixelType wanted) {
  throw std::invalid_argument(v.source + ": voxels are " + pixel_type_name(v.pixel_type) + ", not " +
                              pixel_type_name(wanted));
}

std::vector<float> Volume::to_float() const {
  std::vector<float> out(static_cast<std::size_t>(geometry.voxel_count()));
  visit_pixels(*this, [&](const auto* p) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(p[i]);
  });
  return out;
}

std::pair<double, double> Volume::value_range() const {
  const std::size_t n = static_cast<std::size_t>(geometry.voxel_count());
  if (n == 0) throw std::invalid_argument(source + ": empty volume has no value range");
  return visit_pixels(*this, [&](const auto* p) {
    double lo = static_cast<double>(p[0]), hi = lo;
    for (std::size_t i = 1; i < n; ++i) {
      const double x = static_cast<double>(p[i]);
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    return std::pair<double, double>(lo, hi);
  });
}

Volume Volume::zeros(const Geometry& g, PixelType t) {
  Volume v;
  v.geometry = g;
  v.pixel_type = t;
  v.bytes.assign(static_cast<std::size_t>(g.voxel_count()) * pixel_type_size(t), 0);
  return v;
}

void Volume::validate() const {
  const std::string who = source.empty() ? std::string("volume") : source;
  for (int a = 0; a < 3; ++a) {
    if (geometry.size[a] <= 0) throw std::invalid_argument(who + ": size along axis " + std::to_string(a) + " is not positive");
    if (!(geometry.spacing[a] > 0) || !std::isfinite(geometry.spacing[a]))
      throw std::invalid_argument(who + ": spacing along axis " + std::to_string(a) + " is not a positive number");
  }
  const std::size_t want = static_cast<std::size_t>(geometry.voxel_count()) * pixel_type_size(pixel_type);
  if (bytes.size() != want)
    throw std::invalid_argument(who + ": holds " + std::to_string(bytes.size()) + " bytes, geometry needs " +
                                std::to_string(want));
  // Columns must be unit length and mutually orthogonal (ITK's own tolerance is looser; 1e-4 catches real errors).
  const auto& d = geometry.direction;
  for (int a = 0; a < 3; ++a)
    for (int b = a; b < 3; ++b) {
      double dot = 0;
      for (int r = 0; r < 3; ++r) dot += d[r][a] * d[r][b];
      if (std::abs(dot - (a == b ? 1.0 : 0.0)) > 1e-4)
        throw std::invalid_argument(who + ": direction matrix is not orthonormal");
    }
}

}  // namespace tessera::io
