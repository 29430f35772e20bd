// PNG files through zlib (already linked for LibTorch's archives).
#include "base/png.hpp"

#include <zlib.h>

#include "base/error.hpp"

namespace tpt {

namespace {

void put_be32(std::vector<uint8_t> &out, uint32_t v) {
  for (int i = 3; i >= 0; --i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void png_chunk(std::vector<uint8_t> &out, const char type[4], const std::vector<uint8_t> &data) {
  put_be32(out, static_cast<uint32_t>(data.size()));
  size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  uLong c = crc32(0L, Z_NULL, 0);
  c = crc32(c, out.data() + start, static_cast<uInt>(out.size() - start));
  put_be32(out, static_cast<uint32_t>(c));
}

}  // namespace

std::vector<uint8_t> encode_png(const uint8_t *pixels, int64_t h, int64_t w, int64_t c) {
  if (h <= 0 || w <= 0 || h > (1 << 24) || w > (1 << 24) || (c != 1 && c != 3 && c != 4))
    invalid_argument("a PNG image needs H, W >= 1 and 1, 3 or 4 channels");
  std::vector<uint8_t> raw;
  const size_t row = static_cast<size_t>(w * c);
  raw.reserve(static_cast<size_t>(h) * (row + 1));
  for (int64_t y = 0; y < h; ++y) {
    raw.push_back(0);  // filter: none
    raw.insert(raw.end(), pixels + static_cast<size_t>(y) * row, pixels + static_cast<size_t>(y + 1) * row);
  }
  uLongf zlen = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> z(zlen);
  if (compress2(z.data(), &zlen, raw.data(), static_cast<uLong>(raw.size()), 6) != Z_OK)
    fail(TPT_ERR_OUT_OF_MEMORY, "zlib could not compress a PNG image");
  z.resize(zlen);
  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> ihdr;
  put_be32(ihdr, static_cast<uint32_t>(w));
  put_be32(ihdr, static_cast<uint32_t>(h));
  ihdr.push_back(8);                                     // bit depth
  ihdr.push_back(c == 1 ? 0 : c == 3 ? 2 : 6);           // grey, RGB, RGBA
  ihdr.push_back(0), ihdr.push_back(0), ihdr.push_back(0);  // deflate, no filter method, no interlace
  png_chunk(out, "IHDR", ihdr);
  png_chunk(out, "IDAT", z);
  png_chunk(out, "IEND", {});
  return out;
}

}  // namespace tpt
