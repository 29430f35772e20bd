#!/usr/bin/env bash
# Benchmark dataflow-speed: Fashion-MNIST batches of 128 (decode, normalize,
# random crop with padding, flip, batch) through tptrain's dataflow
# (tools/test_data_speed --augment) vs python3-torch's DataLoader doing the
# same work (benchmarks/dataflow_speed.py), with the same number of workers:
# threads for tptrain, processes for the DataLoader. One line per worker
# count; the last line is the ratio with 2 workers.
#   benchmarks/run dataflow-speed [BATCHES]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
batches=${1:-300}
for w in 0 2; do
  ours=$("$root/build/tools/test_data_speed" --augment --threads "$w" --count "$batches" --warmup 10)
  echo "workers=$w tptrain: $ours"
  py=$(/usr/bin/python3 "$root/benchmarks/dataflow_speed.py" "$w" "$batches")
  echo "workers=$w python: $py"
  a=$(printf '%s\n' "$ours" | sed -E 's/.* ([0-9.]+) images\/s$/\1/')
  b=$(printf '%s\n' "$py" | awk '{print $2}')
  ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }')
  echo "workers=$w ratio=$ratio"
done
echo "baseline for the last line: python3-torch DataLoader, 2 worker processes"
echo "dataflow-speed ratio=$ratio goal=1"
