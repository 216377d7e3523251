// A 3D scalar image with its physical geometry, as ITK describes it: voxel
// (i,j,k) sits at origin + direction * diag(spacing) * (i,j,k) in LPS
// millimetres. The buffer is x-fastest (i varies quickest), like ITK's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::io {

enum class PixelType { kUInt8, kInt8, kUInt16, kInt16, kUInt32, kInt32, kFloat32, kFloat64 };

// "uint8", "int16", "float32", ... (the names numpy uses).
const char* pixel_type_name(PixelType t);
std::size_t pixel_type_size(PixelType t);

using Vec3 = std::array<double, 3>;
using Mat3 = std::array<std::array<double, 3>, 3>;  // row-major; column c is the LPS direction of index axis c

struct Geometry {
  std::array<std::int64_t, 3> size{0, 0, 0};
  Vec3 spacing{1, 1, 1};
  Vec3 origin{0, 0, 0};
  Mat3 direction{{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}};

  std::int64_t voxel_count() const { return size[0] * size[1] * size[2]; }
  // LPS position of the centre of voxel (i, j, k).
  Vec3 index_to_physical(double i, double j, double k) const;
  bool operator==(const Geometry& o) const;
  bool operator!=(const Geometry& o) const { return !(*this == o); }
};

struct Volume {
  Geometry geometry;
  PixelType pixel_type = PixelType::kFloat32;
  std::vector<std::uint8_t> bytes;  // voxel_count() * pixel_type_size(pixel_type), native endianness
  std::string source;               // file or folder it came from, for messages

  // Typed view; throws std::invalid_argument (naming `source`) when T does not match pixel_type.
  template <class T> T* data();
  template <class T> const T* data() const;

  // Voxel values converted to float (HU for CT), whatever the stored type.
  std::vector<float> to_float() const;
  // Minimum and maximum voxel value, as double.
  std::pair<double, double> value_range() const;

  // Allocates a zeroed volume of the given type and geometry.
  static Volume zeros(const Geometry& g, PixelType t);
  // Checks that bytes.size() agrees with geometry and type, that spacing is
  // positive and the direction matrix is orthonormal; throws naming `source`.
  void validate() const;
};

template <class T> constexpr PixelType pixel_type_of();
template <> constexpr PixelType pixel_type_of<std::uint8_t>() { return PixelType::kUInt8; }
template <> constexpr PixelType pixel_type_of<std::int8_t>() { return PixelType::kInt8; }
template <> constexpr PixelType pixel_type_of<std::uint16_t>() { return PixelType::kUInt16; }
template <> constexpr PixelType pixel_type_of<std::int16_t>() { return PixelType::kInt16; }
template <> constexpr PixelType pixel_type_of<std::uint32_t>() { return PixelType::kUInt32; }
template <> constexpr PixelType pixel_type_of<std::int32_t>() { return PixelType::kInt32; }
template <> constexpr PixelType pixel_type_of<float>() { return PixelType::kFloat32; }
template <> constexpr PixelType pixel_type_of<double>() { return PixelType::kFloat64; }

void throw_pixel_type_mismatch(const Volume& v, PixelType wanted);

template <class T> T* Volume::data() {
  if (pixel_type != pixel_type_of<T>()) throw_pixel_type_mismatch(*this, pixel_type_of<T>());
  return reinterpret_cast<T*>(bytes.data());
}
template <class T> const T* Volume::data() const {
  if (pixel_type != pixel_type_of<T>()) throw_pixel_type_mismatch(*this, pixel_type_of<T>());
  return reinterpret_cast<const T*>(bytes.data());
}

// Calls f(T*) with the typed voxel pointer of v, for generic code over pixel types.
template <class F> decltype(auto) visit_pixels(const Volume& v, F&& f) {
  switch (v.pixel_type) {
    case PixelType::kUInt8: return f(v.data<std::uint8_t>());
    case PixelType::kInt8: return f(v.data<std::int8_t>());
    case PixelType::kUInt16: return f(v.data<std::uint16_t>());
    case PixelType::kInt16: return f(v.data<std::int16_t>());
    case PixelType::kUInt32: return f(v.data<std::uint32_t>());
    case PixelType::kInt32: return f(v.data<std::int32_t>());
    case PixelType::kFloat32: return f(v.data<float>());
    case PixelType::kFloat64: break;
  }
  return f(v.data<double>());
}

}  // namespace tessera::io
