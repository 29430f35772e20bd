#!/bin/sh
# Runs `cargo test` on bindings/rust against the library in the build tree
# (no install) and reports in TAP. Needs TPT_BUILD_ROOT and TPT_SOURCE_ROOT.
set -u
export TPTRAIN_LIB_DIR="$TPT_BUILD_ROOT"
export LD_LIBRARY_PATH="$TPT_BUILD_ROOT${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CARGO_TARGET_DIR="$TPT_BUILD_ROOT/cargo-target"
export RUST_BACKTRACE=0
log="$TPT_BUILD_ROOT/cargo-test.log"
cd "$TPT_SOURCE_ROOT/bindings/rust" || exit 1
cargo test --offline --workspace --color never -- --test-threads=1 >"$log" 2>&1
rc=$?
echo "TAP version 13"
n=0
while IFS= read -r line; do
  case "$line" in
    "test "*" ... ok") n=$((n+1)); name=${line#test }; echo "ok $n - ${name% ... ok}";;
    "test "*" ... FAILED") n=$((n+1)); name=${line#test }; echo "not ok $n - ${name% ... FAILED}";;
    "test "*" ... ignored") n=$((n+1)); name=${line#test }; echo "ok $n - ${name% ... ignored} # SKIP ignored";;
  esac
done <"$log"
if [ "$rc" -ne 0 ]; then n=$((n+1)); echo "not ok $n - cargo test exited $rc"; sed 's/^/#   /' "$log" | tail -60; fi
if [ "$n" -eq 0 ]; then n=1; echo "not ok 1 - cargo test ran no tests"; sed 's/^/#   /' "$log" | tail -40; fi
grep -E '^test result:' "$log" | sed 's/^/# /'
echo "1..$n"
