// Which reader a path belongs to, decided from the first bytes of the file
// (magic numbers) and, where those say nothing, from its extension.
#pragma once

#include <string>

namespace tessera::io {

enum class FileKind { kVolume, kDicomFolder, kSlide, kVideo };

const char* file_kind_name(FileKind k);  // "volume", "dicom-folder", "slide", "video"

// Throws std::runtime_error naming the path when it does not exist, is
// empty, or is neither a known format by content nor by extension, or when
// content and extension contradict each other (a PNG renamed .nii.gz).
FileKind detect_file_kind(const std::string& path);

}  // namespace tessera::io
