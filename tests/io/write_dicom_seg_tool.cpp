// Test tool: a label volume on a DICOM series' grid → DICOM SEG through the io
// writer, without a model (tests/cli/dicom_seg_test.sh checks the result).
// usage: write_dicom_seg_tool LABELS DICOM_DIR OUT.dcm [VALUE=NAME ...]
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

#include "tessera/io/dicom_seg.h"
#include "tessera/io/volume_io.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s LABELS DICOM_DIR OUT.dcm [VALUE=NAME ...]\n", argv[0]);
    return 2;
  }
  try {
    tessera::io::DicomSegOptions opt;
    for (int i = 4; i < argc; ++i) {
      const std::string kv = argv[i];
      const auto eq = kv.find('=');
      if (eq == std::string::npos) throw std::runtime_error("expected VALUE=NAME, got " + kv);
      opt.names[std::stoll(kv.substr(0, eq))] = kv.substr(eq + 1);
    }
    const auto labels = tessera::io::read_volume(argv[1]);
    const auto s = tessera::io::write_dicom_seg(argv[3], labels, argv[2], opt);
    std::printf("%s: %d segments, %d frames\n", argv[3], s.segments, s.frames);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_dicom_seg_tool: %s\n", e.what());
    return 1;
  }
}
