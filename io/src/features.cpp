#include "tessera/io/features.h"

namespace tessera::io {

BuiltFeatures built_features() {
  return {bool(TESSERA_IO_HAS_ITK),    bool(TESSERA_IO_HAS_OPENSLIDE), bool(TESSERA_IO_HAS_FFMPEG),
          bool(TESSERA_IO_HAS_HDF5),   bool(TESSERA_IO_HAS_OPENCV),    bool(TESSERA_IO_HAS_TIFF), bool(TESSERA_IO_HAS_JSON),
          bool(TESSERA_IO_HAS_DCMTK)};
}

}  // namespace tessera::io
