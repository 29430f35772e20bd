#!/usr/bin/env bash
# Benchmark dist-scaling: towers-scaling's CNN on zeros, BATCH images per
# process and step:
#   1 process x 1 thread (tptrain, no job),
#   2 processes x 1 thread started by tools/tptrain-run (Gloo on loopback;
#     overlap on, and off),
#   1 process x 2 threads with batch 2 x BATCH (what this machine's two
#     cores give one process),
#   2 processes x 1 thread training alone at the same time, no job (what
#     the two cores give two processes: the ceiling of any scaling here),
#   2 processes x 1 thread of PyTorch DDP (python3-torch, Gloo), and one
#     process of it (for scale).
# Rounds alternate the configurations; each prints the job's images/s, the
# median of the rounds. The last lines are the ratios: 2 processes vs
# PyTorch DDP (goal >= 1.0), vs the two lone processes (the ceiling), and
# vs 2 x 1 process (the issue's scaling efficiency, goal >= 0.9).
#
#   benchmarks/dist_scaling.sh [ROUNDS] [STEPS] [BATCH]   (defaults 5 60 256: 10 warm-up steps
# first on every side, DDP's bucket rebuild after its first step included)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-5} steps=${2:-60} batch=${3:-256}
build=${BUILD_DIR:-$root/build}  # benchmarks/run all passes its --build
bench=$build/benchmarks/bench_dist_scaling
run=$build/tools/tptrain-run
names=(one two two_no_overlap one_two_threads two_alone ddp ddp_one)
declare -A label=([one]="1 process x 1 thread" [two]="2 processes x 1 thread" [two_no_overlap]="  the same, overlap off"
                  [one_two_threads]="1 process x 2 threads, batch x 2"
                  [two_alone]="2 lone processes at once, summed"
                  [ddp]="PyTorch DDP, 2 processes x 1 thread" [ddp_one]="PyTorch, 1 process x 1 thread")
measure() {
  case $1 in
    one) env -u WORLD_SIZE OMP_NUM_THREADS=1 "$bench" "$steps" "$batch" ;;
    two) OMP_NUM_THREADS=1 "$run" -n 2 --no-prefix "$bench" "$steps" "$batch" overlap ;;
    two_no_overlap) OMP_NUM_THREADS=1 "$run" -n 2 --no-prefix "$bench" "$steps" "$batch" no-overlap ;;
    one_two_threads) env -u WORLD_SIZE OMP_NUM_THREADS=2 "$bench" "$steps" $((2 * batch)) overlap 2 ;;
    two_alone) (env -u WORLD_SIZE OMP_NUM_THREADS=1 "$bench" "$steps" "$batch" &
                env -u WORLD_SIZE OMP_NUM_THREADS=1 "$bench" "$steps" "$batch"; wait) |
                 awk '/^images\/s/ {s += $2} END {print "images/s", s}' ;;
    ddp) OMP_NUM_THREADS=1 /usr/bin/python3 "$root/benchmarks/dist_scaling.py" "$steps" "$batch" 2 ;;
    ddp_one) OMP_NUM_THREADS=1 /usr/bin/python3 "$root/benchmarks/dist_scaling.py" "$steps" "$batch" 1 ;;
  esac | awk '/^images\/s/ {print $2}'
}
declare -A all
for ((r = 0; r < rounds; ++r)); do
  line="# round $((r + 1)):"
  for ((c = 0; c < ${#names[@]}; ++c)); do
    k=${names[$(((c + r) % ${#names[@]}))]}  # alternate which goes first
    v=$(measure "$k")
    [ -n "$v" ] || { echo "dist-scaling: $k printed no images/s" >&2; exit 1; }
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
awk -v a="${med[two]}" -v b="${med[one_two_threads]}" 'BEGIN { printf "2 processes vs 1 process x 2 threads: %.3f\n", a / b }'
awk -v a="${med[two_alone]}" -v b="${med[one]}" 'BEGIN { printf "the ceiling: 2 lone processes at once give %.2fx one alone (2.00 on 2 free cores)\n", a / b }'
awk -v a="${med[two]}" -v b="${med[two_alone]}" 'BEGIN { printf "2 processes in a job vs 2 lone processes (efficiency against the ceiling): %.3f\n", a / b }'
echo "baseline for the last line: 2 x one process alone (scaling efficiency)"
awk -v a="${med[two]}" -v b="${med[one]}" 'BEGIN { printf "dist-scaling ratio=%.3f goal=0.9\n", a / (2 * b) }'
