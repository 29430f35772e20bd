#!/usr/bin/env bash
# Benchmark checkpoint: saving and restoring a whole training state (an MLP
# with 1.86 M parameters and Adam's slots), tptrain vs python3-torch's
# torch.save + fsync / torch.load + load_state_dict, three rounds alternating
# the two sides; each side's figure is the median of its rounds' medians.
# tptrain's restore is tpt_model_restore: read the whole file, check the
# trailer, the zip and every field, decode it all, copy the variables (a
# resume reads the file the same way, once). The last line: save time ratio.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
reps=${1:-10}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
ts=(); tr=(); ps=(); pl=()
for round in 1 2 3; do
  out=$("$root/build/benchmarks/bench_checkpoint" "$dir" "$reps")
  py=$(/usr/bin/python3 "$root/benchmarks/checkpoint.py" "$dir" "$reps")
  echo "# round $round: tptrain $(echo $out) | python3-torch $(echo $py)"
  ts+=("$(awk '/^save-ms/ {print $2}' <<<"$out")")
  tr+=("$(awk '/^restore-ms/ {print $2}' <<<"$out")")
  ps+=("$(awk '/^save-ms/ {print $2}' <<<"$py")")
  pl+=("$(awk '/^load-ms/ {print $2}' <<<"$py")")
done
med() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
t_save=$(med "${ts[@]}"); t_rest=$(med "${tr[@]}"); p_save=$(med "${ps[@]}"); p_load=$(med "${pl[@]}")
echo "tptrain: save ${t_save} ms, restore ${t_rest} ms; python3-torch: save ${p_save} ms, load ${p_load} ms"
awk -v t="$t_rest" -v p="$p_load" 'BEGIN { printf "checkpoint-restore ratio=%.3f goal=1.0\n", p / t }'
echo "baseline for the last line: torch.save of the same state to a temporary file, fsync, rename, fsync of the folder"
awk -v t="$t_save" -v p="$p_save" 'BEGIN { printf "checkpoint ratio=%.3f goal=1.0\n", p / t }'
