// A synthetic abdominal CT made of ellipsoid "organs" with typical Hounsfield
// units, plus its label map: sample data the project makes itself. The
// geometry is deliberately awkward (oblique direction, anisotropic spacing,
// non-zero origin) so that geometry bugs show up in tests and demos.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/io/volume.h"

namespace tessera::io {

struct PhantomOrgan {
  std::string name;
  int label;       // value in the label map (0 is background)
  double hu;       // mean Hounsfield units
  Vec3 centre_mm;  // relative to the volume centre, in the volume's own axes
  Vec3 radii_mm;
};

struct CtPhantom {
  Volume ct;      // int16 HU
  Volume labels;  // uint8, same geometry
  std::vector<PhantomOrgan> organs;
};

struct CtPhantomOptions {
  std::array<std::int64_t, 3> size{96, 80, 48};
  Vec3 spacing{0.9, 0.9, 2.5};  // mm, anisotropic like a clinical CT
  double tilt_degrees = 12;     // rotation about the superior axis, then 6 deg about left-right: oblique
  double noise_hu = 15;         // Gaussian noise, deterministic for a given seed
  std::uint32_t seed = 1234;
  // Anatomical variation, for training sets: 0 is the fixed phantom; v > 0
  // moves each organ's centre by up to v x 12% of the field of view along
  // each axis, scales its radii by 1 +/- v x 20% and shifts its HU by up to
  // +/- v x 15 (drawn from `seed`, so still deterministic).
  double variation = 0;
};

CtPhantom make_ct_phantom(const CtPhantomOptions& options = {});

// One phantom of a training/validation set: size, spacing, tilt, noise and
// anatomy all drawn from `seed`, then stored in a random orientation
// (LPS, RAS, LAS, RPI, ...) with the anatomy unchanged in patient space, as
// scans from different scanners are. Same seed, same phantom.
CtPhantom make_random_ct_phantom(std::uint64_t seed);

}  // namespace tessera::io
