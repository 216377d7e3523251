#include "tessera/io/orientation.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace tessera::io {
namespace {

// For each index axis, the physical axis (0=x L/R, 1=y P/A, 2=z I/S) it runs
// along most closely and the sign of that cosine. Greedy on the largest
// |cosine| first, so oblique scans get a one-to-one assignment.
void dominant_axes(const Mat3& d, std::array<int, 3>& phys, std::array<int, 3>& sign) {
  bool row_used[3] = {false, false, false}, col_used[3] = {false, false, false};
  for (int step = 0; step < 3; ++step) {
    int br = -1, bc = -1;
    double best = -1;
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c)
        if (!row_used[r] && !col_used[c] && std::abs(d[r][c]) > best) {
          best = std::abs(d[r][c]);
          br = r;
          bc = c;
        }
    row_used[br] = col_used[bc] = true;
    phys[bc] = br;
    sign[bc] = d[br][bc] >= 0 ? 1 : -1;
  }
}

// LPS letters: index increasing along +x points Left, +y Posterior, +z Superior.
const char kPositive[3] = {'L', 'P', 'S'};
const char kNegative[3] = {'R', 'A', 'I'};

void parse_code(const std::string& code, std::array<int, 3>& phys, std::array<int, 3>& sign) {
  bool seen[3] = {false, false, false};
  if (code.size() != 3) throw std::invalid_argument("orientation code '" + code + "' must have three letters");
  for (int a = 0; a < 3; ++a) {
    const char ch = static_cast<char>(std::toupper(static_cast<unsigned char>(code[a])));
    int found = -1;
    for (int r = 0; r < 3; ++r) {
      if (ch == kPositive[r]) found = r, sign[a] = 1;
      if (ch == kNegative[r]) found = r, sign[a] = -1;
    }
    if (found < 0 || seen[found])
      throw std::invalid_argument("orientation code '" + code + "' needs one of L/R, one of A/P and one of S/I");
    seen[found] = true;
    phys[a] = found;
  }
}

// out index o maps to in index with in[axis[a]] = flip[a] ? n-1-o[a] : o[a].
template <class T>
void move_voxels(const T* in, const std::array<std::int64_t, 3>& in_size, T* out, const std::array<int, 3>& axis,
                 const std::array<bool, 3>& flip) {
  std::array<std::int64_t, 3> in_stride{1, in_size[0], in_size[0] * in_size[1]};
  std::array<std::int64_t, 3> out_size{in_size[axis[0]], in_size[axis[1]], in_size[axis[2]]};
  // Per output axis: where to start in the input and how far one step moves.
  std::array<std::int64_t, 3> step{}, start{};
  std::int64_t base = 0;
  for (int a = 0; a < 3; ++a) {
    step[a] = flip[a] ? -in_stride[axis[a]] : in_stride[axis[a]];
    start[a] = flip[a] ? (out_size[a] - 1) * in_stride[axis[a]] : 0;
    base += start[a];
  }
  std::size_t o = 0;
  for (std::int64_t k = 0; k < out_size[2]; ++k)
    for (std::int64_t j = 0; j < out_size[1]; ++j) {
      std::int64_t src = base + k * step[2] + j * step[1];
      for (std::int64_t i = 0; i < out_size[0]; ++i, src += step[0]) out[o++] = in[src];
    }
}

Volume permute_flip(const Volume& v, const std::array<int, 3>& axis, const std::array<bool, 3>& flip,
                    const Geometry& out_geometry) {
  Volume out = Volume::zeros(out_geometry, v.pixel_type);
  out.source = v.source;
  visit_pixels(v, [&](const auto* in) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(in)>>;
    move_voxels<T>(in, v.geometry.size, reinterpret_cast<T*>(out.bytes.data()), axis, flip);
  });
  return out;
}

}  // namespace

std::string orientation_code(const Mat3& direction) {
  std::array<int, 3> phys{}, sign{};
  dominant_axes(direction, phys, sign);
  std::string code(3, '?');
  for (int c = 0; c < 3; ++c) code[c] = sign[c] > 0 ? kPositive[phys[c]] : kNegative[phys[c]];
  return code;
}

Volume reorient(const Volume& v, const std::string& target, Reorientation* applied) {
  v.validate();
  std::array<int, 3> src_phys{}, src_sign{}, dst_phys{}, dst_sign{};
  dominant_axes(v.geometry.direction, src_phys, src_sign);
  parse_code(target, dst_phys, dst_sign);
  Reorientation r;
  r.original = v.geometry;
  for (int a = 0; a < 3; ++a)
    for (int c = 0; c < 3; ++c)
      if (src_phys[c] == dst_phys[a]) {
        r.axis[a] = c;
        r.flip[a] = src_sign[c] != dst_sign[a];
      }
  const Geometry& g = v.geometry;
  Geometry out;
  double corner[3] = {0, 0, 0};  // input index that becomes output voxel (0,0,0)
  for (int a = 0; a < 3; ++a) {
    const int c = r.axis[a];
    out.size[a] = g.size[c];
    out.spacing[a] = g.spacing[c];
    for (int row = 0; row < 3; ++row) out.direction[row][a] = r.flip[a] ? -g.direction[row][c] : g.direction[row][c];
    if (r.flip[a]) corner[c] = static_cast<double>(g.size[c] - 1);
  }
  out.origin = g.index_to_physical(corner[0], corner[1], corner[2]);
  if (applied) *applied = r;
  return permute_flip(v, r.axis, r.flip, out);
}

Volume undo_reorientation(const Volume& reoriented, const Reorientation& applied) {
  std::array<int, 3> inv_axis{};
  std::array<bool, 3> inv_flip{};
  for (int a = 0; a < 3; ++a) {
    inv_axis[applied.axis[a]] = a;
    inv_flip[applied.axis[a]] = applied.flip[a];
  }
  for (int a = 0; a < 3; ++a)
    if (reoriented.geometry.size[a] != applied.original.size[applied.axis[a]])
      throw std::invalid_argument(reoriented.source + ": size does not match the reoriented frame it should come from");
  if (reoriented.bytes.size() !=
      static_cast<std::size_t>(reoriented.geometry.voxel_count()) * pixel_type_size(reoriented.pixel_type))
    throw std::invalid_argument(reoriented.source + ": voxel buffer does not match its size");
  return permute_flip(reoriented, inv_axis, inv_flip, applied.original);
}

}  // namespace tessera::io
