// Builds NIfTI-1 single files byte by byte, so tests control exactly what
// ITK must cope with: endianness, scl_slope/scl_inter, qform, 4D, vectors.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tessera::io::test {

struct NiftiSpec {
  std::array<std::int16_t, 8> dim{3, 4, 3, 2, 1, 1, 1, 1};
  std::array<float, 3> pixdim{1.5f, 2.0f, 3.0f};
  std::array<float, 3> qoffset{10.f, 20.f, 30.f};  // RAS, as NIfTI stores it
  float scl_slope = 0.f;                           // 0 means "no scaling" in NIfTI
  float scl_inter = 0.f;
  std::int16_t intent_code = 0;
  bool big_endian = false;
  // When set, qform_code is 0 and the affine comes from these sform rows (RAS).
  bool use_sform = false;
  std::array<std::array<float, 4>, 3> srow{};
};

// int16 voxels (datatype 4), qform_code 1 with identity rotation.
inline std::string make_nifti_int16(const NiftiSpec& s, const std::vector<std::int16_t>& voxels) {
  std::string h(352, '\0');
  auto put = [&](std::size_t off, const void* p, std::size_t n) {
    std::memcpy(&h[off], p, n);
    if (s.big_endian) std::reverse(h.begin() + static_cast<long>(off), h.begin() + static_cast<long>(off + n));
  };
  auto put_i32 = [&](std::size_t off, std::int32_t v) { put(off, &v, 4); };
  auto put_i16 = [&](std::size_t off, std::int16_t v) { put(off, &v, 2); };
  auto put_f32 = [&](std::size_t off, float v) { put(off, &v, 4); };
  put_i32(0, 348);
  for (int i = 0; i < 8; ++i) put_i16(40 + 2 * i, s.dim[i]);
  put_i16(68, s.intent_code);
  put_i16(70, 4);   // DT_INT16
  put_i16(72, 16);  // bitpix
  put_f32(76, 1.f);  // qfac
  for (int i = 0; i < 3; ++i) put_f32(80 + 4 * i, s.pixdim[i]);
  for (int i = 3; i < 7; ++i) put_f32(80 + 4 * i, 1.f);
  put_f32(108, 352.f);  // vox_offset
  put_f32(112, s.scl_slope);
  put_f32(116, s.scl_inter);
  h[123] = 2;           // xyzt_units: millimetres
  put_i16(252, s.use_sform ? 0 : 1);  // qform_code: scanner, or none
  put_i16(254, s.use_sform ? 1 : 0);  // sform_code
  if (s.use_sform)
    for (int r = 0; r < 3; ++r)
      for (int k = 0; k < 4; ++k) put_f32(280 + 16 * r + 4 * k, s.srow[r][k]);
  for (int i = 0; i < 3; ++i) put_f32(268 + 4 * i, s.qoffset[i]);
  std::memcpy(&h[344], "n+1", 4);
  std::string body(voxels.size() * 2, '\0');
  for (std::size_t i = 0; i < voxels.size(); ++i) {
    std::int16_t v = voxels[i];
    std::memcpy(&body[2 * i], &v, 2);
    if (s.big_endian) std::swap(body[2 * i], body[2 * i + 1]);
  }
  return h + body;
}

}  // namespace tessera::io::test
