// The IDX file format (MNIST's): a magic of two zero bytes, a type byte and
// a rank byte, the dimensions as big-endian uint32, then the elements,
// big-endian. Read through zlib, which also reads files that are not gzip.
#include <ATen/ops/empty.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.hpp"
#include "base/files.hpp"
#include "data/dataflow.hpp"

namespace tpt::data {

namespace {

std::vector<uint8_t> read_all(const std::string &path) {
  // A FIFO or a device is refused, not waited on.
  int fd = open_regular(path, "the IDX file " + path);
  gzFile f = gzdopen(fd, "rb");
  if (!f) {
    ::close(fd);
    fail(TPT_ERR_OUT_OF_MEMORY, "cannot read the IDX file " + path + ": zlib could not allocate its state");
  }
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  for (;;) {
    int n = gzread(f, buf, sizeof buf);
    if (n < 0) {
      int code = 0;
      std::string msg = gzerror(f, &code);
      gzclose(f);
      fail(TPT_ERR_IO, "cannot read the IDX file " + path + ": " + msg);
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  // A gzip stream cut short reads as an early end: zlib reports it here.
  int code = 0;
  const char *msg = gzerror(f, &code);
  std::string err = code != Z_OK && code != Z_STREAM_END ? msg : "";
  gzclose(f);
  if (!err.empty()) fail(TPT_ERR_IO, "cannot read the IDX file " + path + ": " + err);
  return out;
}

}  // namespace

at::Tensor read_idx(const std::string &path) {
  std::vector<uint8_t> b = read_all(path);
  auto bad = [&](const std::string &why) { fail(TPT_ERR_IO, "the IDX file " + path + " " + why); };
  if (b.size() < 4) bad("is truncated: " + std::to_string(b.size()) + " bytes, not even a header");
  if (b[0] != 0 || b[1] != 0) bad("has a wrong magic number (not an IDX file)");
  at::ScalarType type;
  size_t elem;
  switch (b[2]) {
    case 0x08: type = at::kByte, elem = 1; break;
    case 0x09: type = at::kChar, elem = 1; break;
    case 0x0B: type = at::kShort, elem = 2; break;
    case 0x0C: type = at::kInt, elem = 4; break;
    case 0x0D: type = at::kFloat, elem = 4; break;
    case 0x0E: type = at::kDouble, elem = 8; break;
    default: {
      static const char hex[] = "0123456789ABCDEF";
      bad(std::string("has an unknown element type 0x") + hex[b[2] >> 4] + hex[b[2] & 15]);
      return {};
    }
  }
  const size_t rank = b[3];
  if (rank < 1) bad("has rank 0 (no rows)");
  if (b.size() < 4 + 4 * rank) bad("is truncated inside its header");
  std::vector<int64_t> dims;
  size_t count = 1;
  for (size_t i = 0; i < rank; ++i) {
    const uint8_t *p = &b[4 + 4 * i];
    uint32_t d = (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
    dims.push_back(d);
    count *= d;
  }
  const size_t header = 4 + 4 * rank, want = count * elem, have = b.size() - header;
  if (have < want)
    bad("is truncated: the header promises " + std::to_string(want) + " bytes of data, the file has " +
        std::to_string(have));
  if (have > want)
    bad("has the wrong size: " + std::to_string(have - want) + " bytes more than the header's " + std::to_string(want));
  at::Tensor t = at::empty(dims, at::TensorOptions().dtype(type));
  uint8_t *dst = static_cast<uint8_t *>(t.data_ptr());
  const uint8_t *src = b.data() + header;
  if (elem == 1) {
    std::memcpy(dst, src, want);
  } else {  // big-endian to the host's order (little-endian)
    for (size_t i = 0; i < count; ++i)
      for (size_t k = 0; k < elem; ++k) dst[i * elem + k] = src[i * elem + (elem - 1 - k)];
  }
  return t;
}

}  // namespace tpt::data
