#!/usr/bin/env bash
# -Dtorch_dir= against LibTorch trees made of symlinks into the system's
# LibTorch (scripts/torch-tree): a PyTorch wheel's torch/ folder, the folder
# above it (site-packages), the LibTorch zip's libtorch/, and trees that are
# not LibTorch. Each is configured only (meson setup, no build: CI builds and
# runs everything against the wheel layout on Debian 13, see .ci/run): the
# version and C++ ABI found, Gloo, the rpath into the tree, and one clear
# error line for a broken tree. Also a tree of the old C++ ABI
# (_GLIBCXX_USE_CXX11_ABI=0, PyTorch's wheels before 2.7 and its "pre-cxx11"
# zips), whose libc10 is a stand-in built here with that ABI: the ABI is found
# and the library's C++ compiles with it. TAP output.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; sed 's/^/# /' "$2" | tail -n 25; }

echo "1..7"
# The version meson reports for the system LibTorch, to expect from the trees.
version=$(awk '/define TORCH_VERSION_(MAJOR|MINOR) /{v = v (v == "" ? "" : ".") $3} END {print v}' \
  /usr/include/torch/csrc/api/include/torch/version.h)

# setup NAME TORCH_DIR: meson setup of a build directory with only the library.
setup() {
  meson setup "$tmp/build-$1" "$root" "-Dtorch_dir=$2" -Dtests=false -Drust=disabled -Dgo=disabled \
    >"$tmp/$1.log" 2>&1
}

# A configured tree: the message names the tree, the version and the ABI;
# the library's rpath points into the tree's lib/; Gloo was found.
check_configured() {
  local name=$1 tree=$2 log="$tmp/$1.log"
  grep -q "LibTorch $version ($tree), C++ ABI _GLIBCXX_USE_CXX11_ABI=1" "$log" || return 1
  grep -Eiq "c10d Gloo \(USE_C10D_GLOO\) *: (true|yes)" "$log" || return 1  # meson 1.0: True, 1.7: true
  grep -q -- "-Wl,-rpath,$tree/lib" "$tmp/build-$name/build.ninja" || return 1
}

wheel=$("$root/scripts/torch-tree" "$tmp/wheel" wheel)
if setup wheel "$wheel" && check_configured wheel "$wheel"; then ok "a wheel's torch/ folder"
else not_ok "a wheel's torch/ folder" "$tmp/wheel.log"; fi

if setup site "$tmp/wheel" && check_configured site "$wheel"; then ok "the folder above torch/ (site-packages)"
else not_ok "the folder above torch/ (site-packages)" "$tmp/site.log"; fi

zip=$("$root/scripts/torch-tree" "$tmp/zip" zip)
if setup zip "$zip" && check_configured zip "$zip"; then ok "the LibTorch zip's libtorch/"
else not_ok "the LibTorch zip's libtorch/" "$tmp/zip.log"; fi

# A tree without lib/: refused with one line naming what is missing.
rm -rf "$zip/lib"
if ! setup nolib "$zip" && grep -q "ERROR: .*-Dtorch_dir=$zip is not a LibTorch tree: it has no lib/" "$tmp/nolib.log"; then
  ok "a tree without lib/ is refused naming lib/"
else not_ok "a tree without lib/ is refused naming lib/" "$tmp/nolib.log"; fi

# A tree whose lib/ lacks libc10: the libraries are named, no half configuration.
"$root/scripts/torch-tree" "$tmp/noc10" wheel >/dev/null
rm -f "$tmp"/noc10/torch/lib/libc10*
if ! setup noc10 "$tmp/noc10/torch" && grep -q "ERROR: .*-Dtorch_dir=$tmp/noc10/torch has no lib/libc10.so" "$tmp/noc10.log"; then
  ok "a tree without libc10 is refused naming c10"
else not_ok "a tree without libc10 is refused naming c10" "$tmp/noc10.log"; fi

# A LibTorch of the old C++ ABI. Debian has none, so the tree's libraries are
# stand-ins compiled here with _GLIBCXX_USE_CXX11_ABI=0: libc10 defines the
# std::string function meson.build's probe calls (c10::detail::torchCheckFail),
# libtorch and libtorch_cpu are empty. The headers are the system's (the same
# for both ABIs). Found: ABI 0 (and no Gloo to link); one file of the library
# (src/base/json.cpp, whose functions take std::string) compiles to symbols of
# the old ABI (std::string is `Ss`, no std::__cxx11), as every C++ file would.
old_tree=$("$root/scripts/torch-tree" "$tmp/old" wheel)
rm -f "$old_tree"/lib/libtorch*.so* "$old_tree"/lib/libc10*.so* "$old_tree"/lib/libgloo*
printf '%s\n' '#include <cstdint>' '#include <stdexcept>' '#include <string>' \
  'namespace c10 { namespace detail {' \
  '[[noreturn]] __attribute__((visibility("default"))) void torchCheckFail(const char *, const char *, uint32_t, const std::string &m) { throw std::runtime_error(m); }' \
  '} }' >"$tmp/old_c10.cpp"
: >"$tmp/empty.cpp"
if c++ -shared -fPIC -D_GLIBCXX_USE_CXX11_ABI=0 -o "$old_tree/lib/libc10.so" "$tmp/old_c10.cpp" >"$tmp/old.log" 2>&1 &&
   c++ -shared -fPIC -o "$old_tree/lib/libtorch_cpu.so" "$tmp/empty.cpp" >>"$tmp/old.log" 2>&1 &&
   c++ -shared -fPIC -o "$old_tree/lib/libtorch.so" "$tmp/empty.cpp" >>"$tmp/old.log" 2>&1 &&
   setup old "$old_tree" &&
   grep -q "LibTorch $version ($old_tree), C++ ABI _GLIBCXX_USE_CXX11_ABI=0" "$tmp/old.log" &&
   ninja -C "$tmp/build-old" libtptrain_core.a.p/src_base_json.cpp.o >>"$tmp/old.log" 2>&1 &&
   nm "$tmp/build-old/libtptrain_core.a.p/src_base_json.cpp.o" >"$tmp/old.nm" &&
   grep -q " T _ZN3tpt4json5Value3setERKSs" "$tmp/old.nm" && ! grep -q __cxx11 "$tmp/old.nm"; then
  ok "a tree of the old C++ ABI: found, and the library compiles with _GLIBCXX_USE_CXX11_ABI=0"
else not_ok "a tree of the old C++ ABI: found, and the library compiles with _GLIBCXX_USE_CXX11_ABI=0" "$tmp/old.log"; fi

# Not a folder at all.
if ! setup none "$tmp/no-such-folder" && grep -q "ERROR: .*-Dtorch_dir=$tmp/no-such-folder is not a LibTorch tree: it has no include/" "$tmp/none.log"; then
  ok "a folder that does not exist is refused"
else not_ok "a folder that does not exist is refused" "$tmp/none.log"; fi
exit $failed
