// Writing an output file so that it either appears whole under its final
// name or not at all: write to "<name>.tmp.<pid>", then rename into place.
#pragma once

#include <functional>
#include <string>

namespace tessera::io {

// Calls write(tmp_path); on success renames tmp_path to `path`, on any
// exception removes tmp_path and rethrows.
void write_atomically(const std::string& path, const std::function<void(const std::string& tmp_path)>& write);

// Same contract, for writers that pick the format from the file name (ITK,
// libavformat, libtiff): the temp file is "<dir>/.<stem>.tmp.<pid><ext>",
// keeping the extension (".nii.gz" counts as one) so the library sees it.
void write_atomically_keeping_extension(const std::string& path,
                                        const std::function<void(const std::string& tmp_path)>& write);

// The file name's extension as writers see it: ".nii.gz", ".mha", "" ...
std::string full_extension(const std::string& path);

// Convenience for text/binary content already in memory.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace tessera::io
