// libFuzzer target: the torch.save reader (tpt::read_torch_save) on any
// bytes. A refusal is a tpt::Error; anything else escaping the reader, a
// crash, a sanitizer report or a hang is a finding. tests/fuzz/run.sh builds
// and runs it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <vector>

#include "base/error.hpp"
#include "base/torch_save.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto bytes = std::make_shared<const std::vector<char>>(reinterpret_cast<const char *>(data),
                                                         reinterpret_cast<const char *>(data) + size);
  try {
    auto tensors = tpt::read_torch_save(bytes, "fuzz input");
  } catch (const tpt::Error &) {
  } catch (const std::exception &e) {
    std::fprintf(stderr, "the torch.save reader let a foreign exception out: %s\n", e.what());
    std::abort();
  }
  return 0;
}
