// Which optional readers and writers this build of tessera_io contains.
#pragma once

namespace tessera::io {

struct BuiltFeatures {
  bool itk, openslide, ffmpeg, hdf5, opencv, tiff, json, dcmtk;
};

BuiltFeatures built_features();

}  // namespace tessera::io
