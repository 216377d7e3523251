#include "tessera/io/slice_stack.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace tessera::io {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kMaxTiltDeg = 0.1;
constexpr double kRelStep = 0.01, kAbsStep = 0.01;  // mm
constexpr double kOrientationTol = 1e-4;

Vec3 cross(const Vec3& a, const Vec3& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}
double dot(const Vec3& a, const Vec3& b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
double norm(const Vec3& a) { return std::sqrt(dot(a, a)); }
Vec3 minus(const Vec3& a, const Vec3& b) { return {a[0] - b[0], a[1] - b[1], a[2] - b[2]}; }

std::string mm(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g mm", v);
  return buf;
}

std::string name_of(const std::string& file) {
  const auto slash = file.find_last_of('/');
  return slash == std::string::npos ? file : file.substr(slash + 1);
}

bool parse_numbers(const std::string& s, double* out, int n) {
  std::istringstream in(s);
  std::string part;
  int i = 0;
  while (std::getline(in, part, '\\')) {
    if (i == n) return false;
    char* end = nullptr;
    out[i] = std::strtod(part.c_str(), &end);
    while (end && *end == ' ') ++end;
    if (end == part.c_str() || (end && *end != '\0') || !std::isfinite(out[i])) return false;
    ++i;
  }
  return i == n;
}

}  // namespace

bool parse_slice_geometry(const std::string& position, const std::string& orientation, SliceGeometry& out) {
  return parse_numbers(position, out.position.data(), 3) && parse_numbers(orientation, out.orientation.data(), 6);
}

void check_slice_stack(const std::string& dir, const std::vector<SliceGeometry>& slices) {
  if (slices.size() < 2) return;
  const auto& o0 = slices.front().orientation;
  for (const auto& s : slices)
    for (int i = 0; i < 6; ++i)
      if (std::abs(s.orientation[i] - o0[i]) > kOrientationTol)
        throw std::runtime_error(dir + ": slices " + name_of(slices.front().file) + " and " + name_of(s.file) +
                                 " have different orientations (ImageOrientationPatient); tessera reads one regular stack");
  const Vec3 normal = cross({o0[0], o0[1], o0[2]}, {o0[3], o0[4], o0[5]});
  if (norm(normal) < 1e-6) throw std::runtime_error(dir + ": ImageOrientationPatient of " + name_of(slices.front().file) + " is degenerate");
  const Vec3 n = {normal[0] / norm(normal), normal[1] / norm(normal), normal[2] / norm(normal)};

  // The stack as a whole must advance along the slice normal.
  const Vec3 span = minus(slices.back().position, slices.front().position);
  const double along = std::abs(dot(span, n)), off = norm(cross(span, n));
  if (along > 0 && std::atan2(off, along) * 180 / kPi > kMaxTiltDeg) {
    char deg[32];
    std::snprintf(deg, sizeof deg, "%.2f", std::atan2(off, along) * 180 / kPi);
    throw std::runtime_error(dir + ": the slices are sheared by " + deg +
                             " degrees (gantry tilt): their positions do not advance along the slice normal; "
                             "resample the series onto an orthogonal grid first");
  }
  std::vector<double> steps;
  for (size_t k = 1; k < slices.size(); ++k) steps.push_back(dot(minus(slices[k].position, slices[k - 1].position), n));
  std::vector<double> sorted(steps);
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  const double median = sorted[sorted.size() / 2];
  for (size_t k = 0; k < steps.size(); ++k) {
    if (std::abs(steps[k]) < kAbsStep)
      throw std::runtime_error(dir + ": slices " + name_of(slices[k].file) + " and " + name_of(slices[k + 1].file) +
                               " are at the same position (duplicate slices, or two series with one UID)");
    if (std::abs(steps[k] - median) > std::max(kAbsStep, kRelStep * std::abs(median)))
      throw std::runtime_error(dir + ": uneven slice spacing: " + mm(std::abs(steps[k])) + " between " +
                               name_of(slices[k].file) + " and " + name_of(slices[k + 1].file) + ", " +
                               mm(std::abs(median)) + " elsewhere (missing slices?)");
  }
}

}  // namespace tessera::io
