// Images as files: PNG through zlib (TensorBoard's images, tpt_image_write_png).
#pragma once

#include <cstdint>
#include <vector>

namespace tpt {

// One H x W x C uint8 image (C = 1, 3 or 4, rows one after the other) as a
// PNG file's bytes.
std::vector<uint8_t> encode_png(const uint8_t *pixels, int64_t h, int64_t w, int64_t c);

}  // namespace tpt
