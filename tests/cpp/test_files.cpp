// tpt::AtomicFile: a file written in pieces of every size (smaller than,
// equal to and across the 2 MiB at which the disk's writeback is started, and
// larger than several of them) reads back byte for byte after commit, with
// and without sync, and replaces an older, larger file whole; destroyed
// without commit, it leaves the target and no temporary.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/files.hpp"

namespace fs = std::filesystem;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "tpt-files-XXXXXX").string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    path = ::mkdtemp(buf.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::vector<char> pattern(size_t n, uint32_t seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = static_cast<char>(seed >> 24);
  }
  return v;
}

std::vector<char> read_all(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

size_t entries(const std::string &dir) {
  size_t n = 0;
  for (const auto &e : fs::directory_iterator(dir)) (void)e, ++n;
  return n;
}

TEST(AtomicFile, PiecesOfEverySizeReadBackWhole) {
  TempDir d;
  const std::string target = d.path + "/file";
  const size_t mib = size_t{1} << 20;
  // piece sizes: tiny, odd, exactly the chunk, across it, several chunks at once
  const std::vector<size_t> pieces = {1, 30, 4095, 2 * mib, 2 * mib - 1, 3, mib + 17, 7 * mib + 5, 0, 64};
  for (bool sync : {true, false}) {
    std::vector<char> want;
    {
      tpt::AtomicFile f(target);
      uint32_t seed = sync ? 1 : 2;
      for (size_t n : pieces) {
        std::vector<char> p = pattern(n, seed++);
        f.write(p.data(), p.size());
        want.insert(want.end(), p.begin(), p.end());
      }
      f.commit(sync);
    }
    EXPECT_EQ(read_all(target), want) << "sync " << sync;
    EXPECT_EQ(entries(d.path), 1u) << "no temporary left";
  }
  // a smaller file replaces the larger one whole
  tpt::write_file_atomic(target, std::string("short"));
  std::vector<char> got = read_all(target);
  EXPECT_EQ(std::string(got.begin(), got.end()), "short");
  // not committed: the target stays, the temporary goes
  {
    tpt::AtomicFile f(target);
    std::vector<char> p = pattern(5 * mib, 9);
    f.write(p.data(), p.size());
  }
  got = read_all(target);
  EXPECT_EQ(std::string(got.begin(), got.end()), "short");
  EXPECT_EQ(entries(d.path), 1u);
}

}  // namespace
