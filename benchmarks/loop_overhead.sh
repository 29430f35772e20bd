#!/usr/bin/env bash
# Benchmark loop-overhead: ns per step of the trainer loop itself (default
# callbacks, run_step = one hooked step around an empty step) from C, Rust and
# Go, each next to a bare for-loop calling the same kind of function in the
# same language. Goal: under 1 us per step from C. The last line's ratio is
# 1000 ns / (C ns per step): R > 1 means under the 1 us budget.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build
c_line=$("$build/benchmarks/bench_loop_overhead" | tail -n 1)
echo "$c_line"
if command -v cargo >/dev/null && [ -f "$root/examples/rust/src/bin/loop_overhead.rs" ]; then
  (cd "$root/examples/rust" && TPTRAIN_LIB_DIR=$build CARGO_TARGET_DIR=$build/cargo-target \
     cargo build --offline --release -q --bin loop_overhead)
  LD_LIBRARY_PATH=$build "$build/cargo-target/release/loop_overhead" | tail -n 1
fi
if command -v go >/dev/null && [ -f "$root/examples/go/loop_overhead/main.go" ]; then
  (cd "$root/examples/go" && GOFLAGS=-mod=mod GOPROXY=off GOCACHE=${GOCACHE:-$build/go-cache} \
     PKG_CONFIG_PATH=$build/meson-uninstalled go build -o "$build/go_loop_overhead" ./loop_overhead)
  LD_LIBRARY_PATH=$build "$build/go_loop_overhead" | tail -n 1
fi
ns=$(printf '%s\n' "$c_line" | sed -E 's/^c: tptrain ([0-9.]+) ns.*/\1/')
echo "baseline: the 1 us per step budget; ratio = 1000 ns / $ns ns per step from C"
awk -v ns="$ns" 'BEGIN { printf "loop-overhead ratio=%.1f goal=1\n", 1000 / ns }'
