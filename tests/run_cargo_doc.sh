#!/bin/sh
# Runs `cargo doc --no-deps` on bindings/rust with warnings denied (broken
# intra-doc links, bad HTML in doc comments, ...) against the build tree and
# reports in TAP. Needs TPT_BUILD_ROOT and TPT_SOURCE_ROOT.
set -u
export TPTRAIN_LIB_DIR="$TPT_BUILD_ROOT"
export CARGO_TARGET_DIR="$TPT_BUILD_ROOT/cargo-target"
export RUSTDOCFLAGS="-D warnings"
log="$TPT_BUILD_ROOT/cargo-doc.log"
cd "$TPT_SOURCE_ROOT/bindings/rust" || exit 1
cargo doc --offline --no-deps --workspace --color never >"$log" 2>&1
rc=$?
echo "TAP version 13"
echo "1..1"
if [ "$rc" -eq 0 ]; then
  echo "ok 1 - cargo doc --no-deps with RUSTDOCFLAGS=-D warnings"
else
  echo "not ok 1 - cargo doc --no-deps with RUSTDOCFLAGS=-D warnings exited $rc"
  sed 's/^/#   /' "$log" | tail -60
fi
