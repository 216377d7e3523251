#include "tessera/patching/volume_tensor.h"

#include <cstring>
#include <optional>
#include <stdexcept>

namespace tessera::patching {

at::Tensor volume_to_tensor(const io::Volume& v, const at::Device& device) {
  const auto& s = v.geometry.size;
  std::optional<at::ScalarType> stored;  // LibTorch has no unsigned 16- or 32-bit type: those go through to_float
  switch (v.pixel_type) {
    case io::PixelType::kUInt8: stored = at::kByte; break;
    case io::PixelType::kInt8: stored = at::kChar; break;
    case io::PixelType::kInt16: stored = at::kShort; break;
    case io::PixelType::kInt32: stored = at::kInt; break;
    case io::PixelType::kFloat32: stored = at::kFloat; break;
    case io::PixelType::kFloat64: stored = at::kDouble; break;
    default: break;
  }
  std::vector<float> vals;
  at::Tensor zyx;
  if (stored) {
    zyx = at::from_blob(const_cast<uint8_t*>(v.bytes.data()), {s[2], s[1], s[0]}, *stored);
  } else {
    vals = v.to_float();
    zyx = at::from_blob(vals.data(), {s[2], s[1], s[0]}, at::kFloat);
  }
  at::Tensor t = zyx.to(device).permute({2, 1, 0}).to(at::kFloat).contiguous();
  if (t.data_ptr() == zyx.data_ptr()) t = t.clone();  // never a view of the volume's (or the local) buffer
  return t.unsqueeze(0);
}

io::Volume tensor_to_volume(const at::Tensor& t0, const io::Geometry& g, io::PixelType type) {
  at::Tensor t = t0.dim() == 4 ? t0.squeeze(0) : t0;
  if (t.dim() != 3 || t.size(0) != g.size[0] || t.size(1) != g.size[1] || t.size(2) != g.size[2])
    throw std::invalid_argument("tensor_to_volume: tensor of shape " + std::string(at::toString(t0.scalar_type())) +
                                " does not match the geometry size " + std::to_string(g.size[0]) + "x" +
                                std::to_string(g.size[1]) + "x" + std::to_string(g.size[2]));
  at::Tensor zyx = t.to(at::kCPU).permute({2, 1, 0}).contiguous();
  io::Volume v = io::Volume::zeros(g, type);
  auto store = [&](at::ScalarType st, double lo, double hi, bool integer) {
    at::Tensor x = zyx;
    if (x.scalar_type() != st) {  // a label map already in the volume's type is copied as it is
      x = x.is_floating_point() ? x.to(at::kDouble) : x.to(at::kLong);
      if (integer && x.is_floating_point()) x = x.round();
      if (integer) x = x.clamp(lo, hi);
    }
    x = x.to(st).contiguous();
    std::memcpy(v.bytes.data(), x.data_ptr(), v.bytes.size());
  };
  switch (type) {
    case io::PixelType::kUInt8: store(at::kByte, 0, 255, true); break;
    case io::PixelType::kInt8: store(at::kChar, -128, 127, true); break;
    case io::PixelType::kInt16: store(at::kShort, -32768, 32767, true); break;
    case io::PixelType::kInt32: store(at::kInt, -2147483648.0, 2147483647.0, true); break;
    case io::PixelType::kFloat32: store(at::kFloat, 0, 0, false); break;
    case io::PixelType::kFloat64: store(at::kDouble, 0, 0, false); break;
    case io::PixelType::kUInt16: {  // no unsigned 16-bit tensors in LibTorch: go through int32
      at::Tensor x = zyx.to(at::kDouble).round().clamp(0, 65535).to(at::kInt).contiguous();
      const int32_t* src = x.data_ptr<int32_t>();
      auto* dst = v.data<uint16_t>();
      for (int64_t i = 0; i < x.numel(); ++i) dst[i] = static_cast<uint16_t>(src[i]);
      break;
    }
    case io::PixelType::kUInt32: {
      at::Tensor x = zyx.to(at::kDouble).round().clamp(0, 4294967295.0).to(at::kLong).contiguous();
      const int64_t* src = x.data_ptr<int64_t>();
      auto* dst = v.data<uint32_t>();
      for (int64_t i = 0; i < x.numel(); ++i) dst[i] = static_cast<uint32_t>(src[i]);
      break;
    }
  }
  return v;
}

}  // namespace tessera::patching
