#!/usr/bin/env bash
# The thread counts tptrain sets when it is loaded (src/base/cpu_threads.hpp),
# read from tpt_build_info (examples/hello prints it) and checked against
# what util-linux says of this machine: LibTorch's intra-op threads are one
# per physical core the process may run on (lscpu's CORE of each CPU in the
# affinity mask; at most the cgroup's CPU quota), 1 under `taskset` to one
# CPU, OMP_NUM_THREADS's count where it is set; a pthread OpenBLAS is at one
# thread, unless TPT_BLAS_POOL=keep. TAP output.
#
#   test_threads.sh HELLO
set -u
hello=$1
n=0 failed=0
check() {  # DESCRIPTION COMMAND...: one TAP line
  local what=$1; shift
  n=$((n + 1))
  if "$@"; then echo "ok $n - $what"; else echo "not ok $n - $what"; failed=1; fi
}
for t in lscpu taskset; do
  command -v "$t" >/dev/null || { echo "1..0 # SKIP $t not found"; exit 0; }
done

intra() { sed -n 's/^intra-op threads: \([0-9]*\).*/\1/p' <<<"$1"; }
blas() { sed -n 's/^BLAS: //p' <<<"$1"; }
run() { env -u OMP_NUM_THREADS -u MKL_NUM_THREADS -u TPT_BLAS_POOL "$@" "$hello"; }

# The cores: distinct (socket, core) pairs among the CPUs this shell may use.
allowed=$(taskset -cp $$ | sed 's/.*: *//')
in_list() {  # CPU LIST: is CPU in a list like 0-3,6
  local c=$1 part
  IFS=, read -ra parts <<<"$2"
  for part in "${parts[@]}"; do
    if [[ $part == *-* ]]; then ((c >= ${part%-*} && c <= ${part#*-})) && return 0
    else ((c == part)) && return 0; fi
  done
  return 1
}
cores=$(lscpu -p=CPU,CORE,SOCKET | grep -v '^#' | while IFS=, read -r cpu core socket; do
  in_list "$cpu" "$allowed" && echo "$socket/$core"
done | sort -u | wc -l)
# The cgroup (v2) quota of this process's own cgroup, rounded up.
cg=$(sed -n 's/^0:://p' /proc/self/cgroup 2>/dev/null | head -1)
max=$(cat "/sys/fs/cgroup${cg%/}/cpu.max" 2>/dev/null || true)
if [[ $max =~ ^([0-9]+)\ ([0-9]+)$ ]]; then
  q=$(((BASH_REMATCH[1] + BASH_REMATCH[2] - 1) / BASH_REMATCH[2]))
  ((q < cores)) && cores=$q
fi

out=$(run) || { echo "1..0 # SKIP $hello failed"; exit 0; }
got=$(intra "$out")
check "intra-op threads: one per usable core ($cores; tptrain says $got)" [ "$got" = "$cores" ]
first=${allowed%%[,-]*}
got=$(intra "$(run taskset -c "$first")")
check "under taskset to one CPU: 1 (tptrain says $got)" [ "$got" = 1 ]
got=$(intra "$(run OMP_NUM_THREADS=3)")
check "OMP_NUM_THREADS=3: LibTorch follows it (tptrain says $got)" [ "$got" = 3 ]
b=$(blas "$out")
if [[ $b == *"pthread pool"* ]]; then
  check "a pthread OpenBLAS runs on one thread ($b)" grep -q ', 1 thread$' <<<"$b"
  kb=$(blas "$(run TPT_BLAS_POOL=keep OPENBLAS_NUM_THREADS=2)")
  check "TPT_BLAS_POOL=keep leaves it as OpenBLAS made it ($kb)" grep -q ', 2 threads (TPT_BLAS_POOL=keep)$' <<<"$kb"
else
  check "the BLAS: $b" [ -n "$b" ]
fi
echo "1..$n"
exit $failed
