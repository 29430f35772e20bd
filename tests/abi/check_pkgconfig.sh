#!/bin/sh
# A C program builds with `cc prog.c $(pkg-config --cflags --libs tptrain)`
# against the uninstalled .pc of the build tree and against a `meson install
# --destdir` copy, and runs.   usage: check_pkgconfig.sh BUILD_ROOT prog.c
set -u
build=$1 prog=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "TAP version 13"
echo "1..2"

# 1. uninstalled: pkg-config prefers tptrain-uninstalled.pc
if PKG_CONFIG_PATH="$build/meson-uninstalled" cc "$prog" -o "$tmp/uninst" \
     $(PKG_CONFIG_PATH="$build/meson-uninstalled" pkg-config --cflags --libs tptrain) 2>"$tmp/err" &&
   LD_LIBRARY_PATH="$build" "$tmp/uninst" >"$tmp/out" 2>&1; then
  echo "ok 1 - uninstalled .pc: $(cat "$tmp/out")"
else
  echo "not ok 1 - uninstalled .pc"; sed 's/^/#   /' "$tmp/err" "$tmp/out" 2>/dev/null
fi

# 2. installed into a destdir
if meson install -C "$build" --destdir "$tmp/root" --no-rebuild --quiet >"$tmp/log" 2>&1; then
  pc=$(find "$tmp/root" -name tptrain.pc | head -n 1)
  libdir=$(dirname "$(find "$tmp/root" -name 'libtptrain.so' | head -n 1)")
  if [ -n "$pc" ] && test -f "$(dirname "$pc")/../../../include/tptrain.h" -o -f "$tmp/root/usr/local/include/tptrain.h" &&
     flags=$(PKG_CONFIG_PATH="$(dirname "$pc")" PKG_CONFIG_SYSROOT_DIR="$tmp/root" pkg-config --cflags --libs tptrain) &&
     cc "$prog" -o "$tmp/inst" $flags 2>"$tmp/err" &&
     LD_LIBRARY_PATH="$libdir" "$tmp/inst" >"$tmp/out" 2>&1; then
    echo "ok 2 - installed .pc (destdir; header, library and .pc installed): $(cat "$tmp/out")"
  else
    echo "not ok 2 - installed .pc ($pc)"; sed 's/^/#   /' "$tmp/err" "$tmp/out" 2>/dev/null
  fi
else
  echo "not ok 2 - meson install --destdir failed"; sed 's/^/#   /' "$tmp/log"
fi
