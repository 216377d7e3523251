// 2D pictures (PNG, JPEG, ...) through OpenCV: overlays, thumbnails,
// associated slide images.
#pragma once

#include <string>

#include "tessera/io/rgb_image.h"

namespace tessera::io {

// Format from the extension; written atomically. Throws naming the file.
void write_image(const std::string& path, const RgbImage& image);
RgbImage read_image(const std::string& path);

}  // namespace tessera::io
