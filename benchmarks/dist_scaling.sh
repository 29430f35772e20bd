#!/usr/bin/env bash
# Benchmark dist-scaling: towers-scaling's CNN, one intra-op thread per
# process, BATCH images per process and step, on zeros:
#   1 process (tptrain, no job),
#   2 processes started by tools/tptrain-run (Gloo on loopback; overlap on,
#     and off),
#   2 processes of PyTorch DDP (python3-torch, Gloo).
# Rounds alternate the configurations; each prints the job's images/s, the
# median of the rounds. The last lines are the ratios: 2 processes vs 2 x
# 1 process (scaling efficiency, goal >= 0.9) and vs PyTorch DDP (goal >= 1.0).
#
#   benchmarks/dist_scaling.sh [ROUNDS] [STEPS] [BATCH]   (defaults 5 20 64)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-5} steps=${2:-20} batch=${3:-64}
bench=$root/build/benchmarks/bench_dist_scaling
run=$root/build/tools/tptrain-run
names=(one two two_no_overlap ddp)
declare -A label=([one]="1 process x 1 thread" [two]="2 processes x 1 thread" [two_no_overlap]="  the same, overlap off"
                  [ddp]="PyTorch DDP, 2 processes x 1 thread")
measure() {
  case $1 in
    one) env -u WORLD_SIZE OMP_NUM_THREADS=1 "$bench" "$steps" "$batch" ;;
    two) "$run" -n 2 --no-prefix "$bench" "$steps" "$batch" overlap ;;
    two_no_overlap) "$run" -n 2 --no-prefix "$bench" "$steps" "$batch" no-overlap ;;
    ddp) OMP_NUM_THREADS=1 /usr/bin/python3 "$root/benchmarks/dist_scaling.py" "$steps" "$batch" 2 ;;
  esac | awk '/^images\/s/ {print $2}'
}
declare -A all
for ((r = 0; r < rounds; ++r)); do
  line="# round $((r + 1)):"
  for ((c = 0; c < ${#names[@]}; ++c)); do
    k=${names[$(((c + r) % ${#names[@]}))]}  # alternate which goes first
    v=$(measure "$k")
    all[$k]="${all[$k]:-} $v"
  done
  for k in "${names[@]}"; do line="$line $k=$(echo ${all[$k]} | awk '{print $NF}')"; done
  echo "$line images/s"
done
declare -A med
for k in "${names[@]}"; do
  read -r m lo hi < <(echo ${all[$k]} | tr ' ' '\n' | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)], v[1], v[NR]}')
  med[$k]=$m
  printf '%-40s %8.1f images/s (min %.1f, max %.1f)\n' "${label[$k]}" "$m" "$lo" "$hi"
done
awk -v a="${med[two]}" -v b="${med[two_no_overlap]}" 'BEGIN { printf "overlap on vs off (2 processes): %.3fx\n", a / b }'
echo "baseline for the next line: PyTorch DDP, the same model, batch and processes"
awk -v a="${med[two]}" -v b="${med[ddp]}" 'BEGIN { printf "dist-scaling-vs-ddp ratio=%.3f goal=1.0\n", a / b }'
echo "baseline for the last line: 2 x one process alone (scaling efficiency)"
awk -v a="${med[two]}" -v b="${med[one]}" 'BEGIN { printf "dist-scaling ratio=%.3f goal=0.9\n", a / (2 * b) }'
