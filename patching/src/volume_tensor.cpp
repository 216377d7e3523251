#include "tessera/patching/volume_tensor.h"

#include <cstring>
#include <stdexcept>

namespace tessera::patching {

at::Tensor volume_to_tensor(const io::Volume& v) {
  const auto& s = v.geometry.size;
  std::vector<float> vals = v.to_float();
  at::Tensor zyx = at::from_blob(vals.data(), {s[2], s[1], s[0]}, at::kFloat).clone();
  return zyx.permute({2, 1, 0}).contiguous().unsqueeze(0);
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
    at::Tensor x = zyx.to(at::kDouble);
    if (integer) x = x.round().clamp(lo, hi);
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
