#!/usr/bin/env bash
# Benchmark mlp-step: steps/s of a tiny MLP through the C API vs a hand-written
# LibTorch C++ loop (goal ratio >= 0.97) and vs python3-torch (goal >= 1.3),
# one intra-op thread each. The last line compares with the LibTorch loop.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
steps=${1:-3000}
out=$("$root/build/benchmarks/bench_mlp_step" "$steps")
echo "$out"
py=$(/usr/bin/python3 "$root/benchmarks/mlp_step.py" "$steps")
echo "$py"
capi=$(printf '%s\n' "$out" | awk '/^c-api/ {print $2}')
hand=$(printf '%s\n' "$out" | awk '/^libtorch/ {print $2}')
pyv=$(printf '%s\n' "$py" | awk '{print $2}')
awk -v c="$capi" -v p="$pyv" 'BEGIN { printf "mlp-step-vs-python ratio=%.3f goal=1.3\n", c / p }'
echo "baseline for the last line: the hand-written LibTorch C++ loop"
awk -v c="$capi" -v h="$hand" 'BEGIN { printf "mlp-step ratio=%.3f goal=0.97\n", c / h }'
