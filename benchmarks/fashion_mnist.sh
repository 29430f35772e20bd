#!/usr/bin/env bash
# Benchmark fashion-mnist: seconds per training epoch of the Fashion-MNIST
# example as a user now writes it (no allocator lines: tptrain keeps freed
# memory itself) against
#   - the example as it was, with its mallopt lines and c10's own allocator
#     (TPT_CPU_ALLOCATOR=system): goal ratio >= 0.95 (within 5 %);
#   - python3-torch on the same network, data and schedule: goal >= 1.1.
# Also, for the record, the example with neither (glibc's defaults), which is
# what a user got before. The sides alternate (A B C D, then D C B A).
#
#   benchmarks/run fashion-mnist [EPOCHS [ROUNDS]]     (default 2 epochs, 2 rounds)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
epochs=${1:-2}
rounds=${2:-2}
data=/usr/share/datasets/fashion-mnist
ninja -C "$root/build" examples/fashion_mnist benchmarks/bench_fashion_mnist_mallopt >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run_side() {  # NAME: one run, its epoch times appended to $tmp/NAME
  local name=$1 log="$tmp/$1.log"
  # A fresh log directory for every run: the example resumes from the one it
  # is given, and would train nothing after the first run.
  rm -rf "$tmp/logdir"
  case $name in
    tptrain) "$root/build/examples/fashion_mnist" "$tmp/logdir" "$data" "$epochs" >"$log" 2>&1 || true ;;
    mallopt) TPT_CPU_ALLOCATOR=system "$root/build/benchmarks/bench_fashion_mnist_mallopt" "$tmp/logdir" "$data" "$epochs" \
      >"$log" 2>&1 || true ;;
    glibc) TPT_CPU_ALLOCATOR=system "$root/build/examples/fashion_mnist" "$tmp/logdir" "$data" "$epochs" >"$log" 2>&1 || true ;;
    python) /usr/bin/python3 "$root/benchmarks/fashion_mnist.py" "$epochs" >"$log" 2>&1 ;;
  esac
  grep -o 'Epoch [0-9]* (global_step [0-9]*) finished, time: [0-9.]*' "$log" | awk '{print $2, $NF}' >>"$tmp/$name" || {
    echo "fashion-mnist: $name printed no epoch times:" >&2; cat "$log" >&2; exit 1; }
  printf '  %-8s %s\n' "$name" "$(awk '{printf "epoch %s %.1f s  ", $1, $2}' <(tail -n "$epochs" "$tmp/$name"))"
}

sides=(tptrain mallopt glibc python)
for ((r = 1; r <= rounds; ++r)); do
  echo "round $r:"
  if ((r % 2)); then order=("${sides[@]}"); else order=(python glibc mallopt tptrain); fi
  for s in "${order[@]}"; do run_side "$s"; done
done

mean() { awk '{s += $2; n += 1} END {printf "%.2f", s / n}' "$tmp/$1"; }
echo "seconds per training epoch (mean over $rounds rounds x $epochs epochs):"
for s in "${sides[@]}"; do printf '  %-8s %s\n' "$s" "$(mean "$s")"; done
echo "  tptrain: the example, no allocator lines; mallopt: the example with its old mallopt lines and c10's allocator;"
echo "  glibc: the example on glibc's defaults and c10's allocator; python: python3-torch, the same work"
awk -v a="$(mean mallopt)" -v b="$(mean tptrain)" 'BEGIN { printf "fashion-mnist-vs-mallopt ratio=%.3f goal=0.95\n", a / b }'
echo "baseline for the last line: python3-torch"
awk -v a="$(mean python)" -v b="$(mean tptrain)" 'BEGIN { printf "fashion-mnist ratio=%.3f goal=1.1\n", a / b }'
