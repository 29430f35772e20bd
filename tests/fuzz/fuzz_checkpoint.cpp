// libFuzzer target: the checkpoint reader (tpt::decode) on any zip archive,
// given the trailer a checkpoint has (its checksum would stop every mutation
// at the door). A refusal is a tpt::Error; anything else escaping the reader
// (a LibTorch exception with its internals in the message, a crash, a
// sanitizer report, a hang) is a finding. tests/fuzz/run.sh builds and runs it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "base/checkpoint_file.hpp"
#include "base/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<char> archive(reinterpret_cast<const char *>(data), reinterpret_cast<const char *>(data) + size);
  try {
    tpt::Checkpoint ck = tpt::decode(tpt::with_trailer(std::move(archive)), "fuzz input");
  } catch (const tpt::Error &) {
  } catch (const std::exception &e) {
    std::fprintf(stderr, "the checkpoint reader let a foreign exception out: %s\n", e.what());
    std::abort();
  }
  return 0;
}
