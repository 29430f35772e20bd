#!/usr/bin/env bash
# tools/tptrain-run, the launcher (issue 15): torchrun's environment contract
# for every rank (one node, and node 1 of 2), the output prefixed by rank with
# whole lines only, the first failure's status (an exit code, a signal),
# SIGTERM then SIGKILL for the others, signals to the launcher forwarded, no
# worker left behind (not even by a SIGKILLed launcher), bad command lines.
# Usage: test_tptrain_run.sh PATH/TO/tptrain-run. TAP output.
set -u
launcher=${1:?usage: test_tptrain_run.sh PATH/TO/tptrain-run}
tmp=$(mktemp -d)
# launchers still running in the background (a failed check) are killed
cleanup() { local p; for p in $(jobs -p); do kill -KILL "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT

n=0 failures=0
rc=0 out="" err=""
# run ARGS...: the launcher with ARGS, OMP_NUM_THREADS unset (so the notice is
# printed whenever there are several workers); leaves rc, out, err.
run() {
  env -u OMP_NUM_THREADS "$launcher" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  rc=$?
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
}
# check NAME COMMAND...: one TAP line; on failure, what the last run printed.
check() {
  local name=$1; shift
  n=$((n+1))
  if "$@"; then echo "ok $n - $name"
  else
    failures=$((failures+1)); echo "not ok $n - $name"
    { echo "rc=$rc"; echo "stdout:"; printf '%s\n' "$out" | head -n 40
      echo "stderr:"; printf '%s\n' "$err" | head -n 40; } | sed 's/^/#   /'
  fi
}
has() { case "$1" in *"$2"*) return 0;; *) return 1;; esac; }
hasnt() { ! has "$@"; }
lines() { if [ -z "$1" ]; then echo 0; else printf '%s\n' "$1" | wc -l; fi; }
now() { echo "${EPOCHREALTIME/,/.}"; }
elapsed_below() { awk -v a="$1" -v b="$2" -v lim="$3" 'BEGIN { exit !(b - a < lim) }'; }
elapsed_at_least() { awk -v a="$1" -v b="$2" -v lim="$3" 'BEGIN { exit !(b - a >= lim) }'; }

# alive PID: the process exists and is not a zombie (an orphan's zombie may
# wait for a PID 1 that does not reap).
alive() {
  kill -0 "$1" 2>/dev/null || return 1
  [ -r "/proc/$1/stat" ] || return 0
  local st; st=$(sed -E 's/^.*\) (.).*$/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
  [ "$st" != Z ]
}
# none_alive DIR: no pid written to DIR/pid.* is alive, waiting up to 3 s
# (a SIGKILLed launcher's workers die asynchronously); lists the living.
none_alive() {
  local i p left
  for i in $(seq 30); do
    left=""
    for p in $(cat "$1"/pid.* 2>/dev/null); do alive "$p" && left="$left $p"; done
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  err="$err
still alive:$left"
  return 1
}
# wait_files DIR COUNT: up to 5 s for COUNT pid files, each holding a pid.
wait_files() {
  local i
  for i in $(seq 50); do
    [ "$(cat "$1"/pid.* 2>/dev/null | grep -c '^[0-9][0-9]*$')" -ge "$2" ] && return 0
    sleep 0.1
  done
  return 1
}
count_files() { ls "$1" 2>/dev/null | grep -c '^pid\.'; }

echo "TAP version 13"

# ------------------------------------------------------------ the environment
# The variables torchrun (PyTorch 1.13's LocalElasticAgent) sets, checked for
# every rank; and that they are the only names added to the parent's.
contract_names="GROUP_RANK GROUP_WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
NCCL_ASYNC_ERROR_HANDLING RANK ROLE_NAME ROLE_RANK ROLE_WORLD_SIZE TORCHELASTIC_MAX_RESTARTS
TORCHELASTIC_RESTART_COUNT TORCHELASTIC_RUN_ID TORCHELASTIC_USE_AGENT_STORE WORLD_SIZE"
names() { grep -o '^[A-Za-z_][A-Za-z0-9_]*=' | tr -d = | sort -u; }

# check_env NAME NPROC NNODES NODE_RANK ADDR PORT RUN_ID OMP NCCL [SIGNALS]: every
# rank's variables in the last run's stdout (PROGRAM was `env`).
check_env() {
  local name=$1 nproc=$2 nnodes=$3 node=$4 addr=$5 port=$6 id=$7 omp=$8 nccl=$9 signals=${10:-1}
  local world=$((nnodes * nproc)) lr rank v missing
  printf '%s\n' "$out" >"$tmp/env_out"
  for ((lr = 0; lr < nproc; lr++)); do
    rank=$((node * nproc + lr))
    : >"$tmp/expect"
    for v in "MASTER_ADDR=$addr" "MASTER_PORT=$port" "WORLD_SIZE=$world" "RANK=$rank" \
             "LOCAL_RANK=$lr" "LOCAL_WORLD_SIZE=$nproc" "GROUP_RANK=$node" "GROUP_WORLD_SIZE=$nnodes" \
             "ROLE_RANK=$rank" "ROLE_WORLD_SIZE=$world" "ROLE_NAME=default" "TORCHELASTIC_RUN_ID=$id" \
             "TORCHELASTIC_RESTART_COUNT=0" "TORCHELASTIC_MAX_RESTARTS=0" \
             "TORCHELASTIC_USE_AGENT_STORE=False" "NCCL_ASYNC_ERROR_HANDLING=$nccl" "OMP_NUM_THREADS=$omp" \
             "TPTRAIN_STOP_ON_SIGNALS=$signals"; do
      [ "$v" = "OMP_NUM_THREADS=" ] || echo "[rank $rank] $v" >>"$tmp/expect"
    done
    # each expected line exactly once; OMP_NUM_THREADS absent when omp is empty
    missing=$(grep -vxF -f "$tmp/env_out" "$tmp/expect" | tr '\n' ' ')
    [ "$(grep -cxF -f "$tmp/expect" "$tmp/env_out")" -eq "$(wc -l <"$tmp/expect")" ] ||
      missing="$missing (some line twice)"
    if [ -z "$omp" ] && grep -q "^\[rank $rank\] OMP_NUM_THREADS=" "$tmp/env_out"; then
      missing="$missing (OMP_NUM_THREADS set)"
    fi
    n=$((n+1))
    if [ -z "$missing" ]; then echo "ok $n - $name: rank $rank has torchrun's variables"
    else failures=$((failures+1)); echo "not ok $n - $name: rank $rank lacks: $missing"; fi
  done
  # ranks that should not be there
  local others
  others=$(printf '%s\n' "$out" | grep -o '^\[rank [0-9]*\]' | sort -u | wc -l)
  check "$name: $nproc ranks print, no more" test "$others" -eq "$nproc"
}

# The parent sets stale values that must be overridden, and leaves out what
# the launcher adds.
penv=(env -u OMP_NUM_THREADS -u NCCL_ASYNC_ERROR_HANDLING -u TPTRAIN_STOP_ON_SIGNALS RANK=99 WORLD_SIZE=99 LOCAL_RANK=7
      TORCHELASTIC_USE_AGENT_STORE=True TPTRAIN_RUN_TEST_MARK=kept)
"${penv[@]}" "$launcher" -n 2 --master-port 29555 --run-id job7 env >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$?; out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
check "2 workers: exit 0" test "$rc" -eq 0
check_env "2 workers" 2 1 0 127.0.0.1 29555 job7 1 1
"${penv[@]}" env | names >"$tmp/parent_names"
printf '%s\n' "$out" | grep '^\[rank 1\] ' | sed 's/^\[rank 1\] //' | names >"$tmp/child_names"
added=$(comm -13 "$tmp/parent_names" "$tmp/child_names" | tr '\n' ' ')
lost=$(comm -23 "$tmp/parent_names" "$tmp/child_names" | tr '\n' ' ')
expected_added=$(printf '%s\n' $contract_names OMP_NUM_THREADS TPTRAIN_STOP_ON_SIGNALS | sort | grep -vx -e RANK -e WORLD_SIZE \
  -e LOCAL_RANK -e TORCHELASTIC_USE_AGENT_STORE | tr '\n' ' ')
check "2 workers: exactly torchrun's variables are added (added: $added)" test "$added" = "$expected_added"
check "2 workers: the rest of the parent's environment is kept (lost: $lost)" test -z "$lost"
check "2 workers: the parent's own variables come through" has "$out" "[rank 0] TPTRAIN_RUN_TEST_MARK=kept"
check "2 workers: one OMP_NUM_THREADS notice" test "$(printf '%s\n' "$err" | grep -c OMP_NUM_THREADS)" -eq 1
check "2 workers: stderr holds only that notice" test "$(lines "$err")" -eq 1

"${penv[@]}" "$launcher" -n 4 env >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$?; out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
check "4 workers: exit 0" test "$rc" -eq 0
check_env "4 workers, defaults" 4 1 0 127.0.0.1 29500 none 1 1

# node 1 of 2 shifts RANK; OMP_NUM_THREADS, NCCL_ASYNC_ERROR_HANDLING and
# TPTRAIN_STOP_ON_SIGNALS set by the parent are kept, and then no notice
env OMP_NUM_THREADS=7 NCCL_ASYNC_ERROR_HANDLING=0 TPTRAIN_STOP_ON_SIGNALS=0 "$launcher" -n 2 --nnodes 2 --node-rank 1 \
  --master-addr 10.1.2.3 --master-port 1234 --run-id j1 env >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$?; out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
check "node 1 of 2: exit 0" test "$rc" -eq 0
check_env "node 1 of 2" 2 2 1 10.1.2.3 1234 j1 7 0 0
check "node 1 of 2: no OMP notice when OMP_NUM_THREADS is set" test -z "$err"

env OMP_NUM_THREADS=3 "$launcher" -n 4 --nnodes 3 --node-rank 2 env >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$?; out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
check_env "node 2 of 3, 4 workers" 4 3 2 127.0.0.1 29500 none 3 1

# one worker: OMP_NUM_THREADS left unset, no notice
env -u OMP_NUM_THREADS "$launcher" env >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$?; out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
check_env "1 worker" 1 1 0 127.0.0.1 29500 none "" 1
check "1 worker: no notice" test -z "$err"

# torchrun's spellings and --opt=VALUE
run --nproc_per_node=2 --master_port=2345 --master_addr=h0 --rdzv_id=r9 --nnodes=2 --node_rank=0 env
check "torchrun spellings: exit 0" test "$rc" -eq 0
check "torchrun spellings: understood" has "$out" "[rank 1] WORLD_SIZE=4"
check "torchrun spellings: port, address, id" \
  eval 'has "$out" "[rank 1] MASTER_PORT=2345" && has "$out" "[rank 0] MASTER_ADDR=h0" && has "$out" "[rank 0] TORCHELASTIC_RUN_ID=r9"'

# ${local_rank} in an argument, as torchrun's macro
run -n 2 --nnodes 2 --node-rank 1 echo 'lr=${local_rank} again ${local_rank}' '$local_rank'
check "\${local_rank} substituted" \
  eval 'has "$out" "[rank 2] lr=0 again 0 \$local_rank" && has "$out" "[rank 3] lr=1 again 1 \$local_rank"'

# ------------------------------------------------------------------ output
# 4 workers write 3000 long lines to stdout and 500 to stderr through awk's
# block buffering (so reads split lines), then a line without its newline.
awk_prog='BEGIN { r = ENVIRON["RANK"]; pad = sprintf("%150s", ""); gsub(/ /, "x", pad)
  for (i = 0; i < 3000; i++) print "line " i " of rank " r " " pad
  for (i = 0; i < 500; i++) print "err " i " of rank " r " " pad > "/dev/stderr"
  printf "partial out %s", r; printf "partial err %s", r > "/dev/stderr" }'
run -n 4 awk "$awk_prog"
check "output: exit 0" test "$rc" -eq 0
check "output: every stdout line is whole and prefixed with its own rank" \
  test "$(grep -cvE '^\[rank ([0-3])\] (line [0-9]+ of rank \1 x{150}|partial out \1)$' "$tmp/out")" -eq 0
check "output: every stderr line is whole and prefixed with its own rank" \
  test "$(grep -vE '^\[rank ([0-3])\] (err [0-9]+ of rank \1 x{150}|partial err \1)$' "$tmp/err" | grep -cv OMP_NUM_THREADS)" -eq 0
check "output: all 4 x 3001 stdout lines" test "$(wc -l <"$tmp/out")" -eq 12004
check "output: all 4 x 501 stderr lines (+ the notice)" test "$(wc -l <"$tmp/err")" -eq 2005
check "output: each rank's lines in order, none lost" \
  awk '/ line / { r = $2; if ($4 != next_[r] + 0) bad = 1; next_[r] = $4 + 1 }
       END { for (r = 0; r < 4; r++) if (next_[r "]"] != 3000) bad = 1; exit bad }' "$tmp/out"
check "output: the partial last line of each rank is flushed with a newline" \
  eval 'for r in 0 1 2 3; do grep -qFx "[rank $r] partial out $r" "$tmp/out" && grep -qFx "[rank $r] partial err $r" "$tmp/err" || exit 1; done'
# a line written in pieces, over time, stays one line
run -n 2 sh -c 'printf "ab"; sleep 0.2; printf "c"; sleep 0.1; printf "d\nsecond\n"'
check "output: a line written in pieces is one line" \
  eval 'printf "%s\n" "$out" | grep -qFx "[rank 0] abcd" && printf "%s\n" "$out" | grep -qFx "[rank 1] abcd" && test "$(lines "$out")" -eq 4'
# --no-prefix: straight through
run -n 2 --no-prefix sh -c 'echo "hello $RANK"; echo "to err $RANK" >&2'
check "--no-prefix: lines not prefixed" \
  eval 'printf "%s\n" "$out" | sort | tr "\n" " " | grep -qx "hello 0 hello 1 "'
check "--no-prefix: stderr not prefixed either" has "$err" "to err 1"

# ---------------------------------------------------------------- failures
# rank 2 exits 3 while the others sleep 30 s: exit 3 within seconds, no one left
d="$tmp/fail"; mkdir "$d"
t0=$(now)
run -n 4 sh -c 'echo $$ >"'"$d"'/pid.$RANK"; if [ "$RANK" = 2 ]; then sleep 1; echo "rank 2 gives up" >&2; exit 3; fi; exec sleep 30'
t1=$(now)
check "first failure: exit 3" test "$rc" -eq 3
check "first failure: within 5 s" elapsed_below "$t0" "$t1" 5
check "first failure: one line names the rank, its pid and status" \
  test "$(printf '%s\n' "$err" | grep -cE "^tptrain-run: rank 2 \(local rank 2, pid $(cat "$d/pid.2")\) exited with status 3; stopping the other 3 workers")" -eq 1
check "first failure: the worker's last words come first" \
  eval 'printf "%s\n" "$err" | grep -v OMP_NUM | head -n 1 | grep -qFx "[rank 2] rank 2 gives up"'
check "first failure: the others stopped by SIGTERM are not reported as failures" \
  test "$(printf '%s\n' "$err" | grep -c '^tptrain-run: rank')" -eq 1
check "first failure: all 4 workers had started" test "$(count_files "$d")" -eq 4
check "first failure: no worker left running" none_alive "$d"

# a worker killed by a signal: 128 + 9
d="$tmp/sig"; mkdir "$d"
run -n 3 sh -c 'echo $$ >"'"$d"'/pid.$RANK"; if [ "$RANK" = 1 ]; then sleep 0.5; kill -KILL $$; fi; exec sleep 30'
check "killed by SIGKILL: exit 137" test "$rc" -eq 137
check "killed by SIGKILL: says so" has "$err" "rank 1 (local rank 1, pid $(cat "$d/pid.1")) was killed by signal 9 (SIGKILL)"
check "killed by SIGKILL: no worker left running" none_alive "$d"
run -n 2 sh -c 'if [ "$RANK" = 0 ]; then kill -SEGV $$; fi; exec sleep 30'
check "killed by SIGSEGV: exit 139" test "$rc" -eq 139

# a worker that ignores SIGTERM is SIGKILLed after --grace-seconds
d="$tmp/stubborn"; mkdir "$d"
t0=$(now)
run -n 2 --grace-seconds 1 sh -c 'trap "" TERM; echo $$ >"'"$d"'/pid.$RANK"; if [ "$RANK" = 0 ]; then sleep 0.5; exit 5; fi; exec sleep 30'
t1=$(now)
check "stubborn worker: exit 5 (the first failure's)" test "$rc" -eq 5
check "stubborn worker: SIGKILL after the grace period, not before" elapsed_at_least "$t0" "$t1" 1.4
check "stubborn worker: and not much later" elapsed_below "$t0" "$t1" 5
check "stubborn worker: says so" has "$err" "rank 1 (pid $(cat "$d/pid.1")) still running 1 s after the stop signal: sending SIGKILL"
check "stubborn worker: gone" none_alive "$d"

# all workers exit 0 at different times: exit 0
run -n 3 sh -c 'sleep 0.$RANK; exit 0'
check "all succeed at different times: exit 0" test "$rc" -eq 0 -a -z "$(printf '%s\n' "$err" | grep -v OMP_NUM_THREADS)"

# ------------------------------------------------------ signals to the launcher
# start_bg DIR ARGS...: the launcher in the background; leaves lpid.
start_bg() {
  local dir=$1; shift
  "$@" >"$dir/out" 2>"$dir/err" </dev/null &
  lpid=$!
}
sleeper='echo $$ >"$D/pid.$RANK"; exec sleep 30'

d="$tmp/term"; mkdir "$d"
start_bg "$d" env D="$d" "$launcher" -n 3 sh -c "$sleeper"
wait_files "$d" 3; started=$?
t0=$(now); kill -TERM "$lpid"; wait "$lpid"; rc=$?; t1=$(now)
out=$(cat "$d/out"); err=$(cat "$d/err")
check "SIGTERM to the launcher: the workers had started" test "$started" -eq 0
check "SIGTERM to the launcher: exit 143" test "$rc" -eq 143
check "SIGTERM to the launcher: promptly" elapsed_below "$t0" "$t1" 5
check "SIGTERM to the launcher: says it forwards it" has "$err" "received SIGTERM: forwarding it to the 3 workers"
check "SIGTERM to the launcher: no worker left running" none_alive "$d"

# SIGINT (a background job of a script starts with SIGINT ignored, as the
# launcher then leaves it: env --default-signal gives it back)
if env --default-signal=INT true 2>/dev/null; then
  d="$tmp/int"; mkdir "$d"
  start_bg "$d" env --default-signal=INT D="$d" "$launcher" -n 2 sh -c "$sleeper"
  wait_files "$d" 2
  kill -INT "$lpid"; wait "$lpid"; rc=$?
  out=$(cat "$d/out"); err=$(cat "$d/err")
  check "SIGINT to the launcher: exit 130" test "$rc" -eq 130
  check "SIGINT to the launcher: no worker left running" none_alive "$d"
else
  n=$((n+1)); echo "ok $n - SIGINT to the launcher # SKIP env --default-signal not supported"
fi

# a second signal while the workers ignore the first: SIGKILL at once
d="$tmp/twice"; mkdir "$d"
start_bg "$d" env D="$d" "$launcher" -n 2 --grace-seconds 60 sh -c 'trap "" TERM; '"$sleeper"
wait_files "$d" 2
t0=$(now); kill -TERM "$lpid"; sleep 0.3; kill -TERM "$lpid"; wait "$lpid"; rc=$?; t1=$(now)
out=$(cat "$d/out"); err=$(cat "$d/err")
check "second SIGTERM: exit 143" test "$rc" -eq 143
check "second SIGTERM: does not wait for the 60 s grace period" elapsed_below "$t0" "$t1" 5
check "second SIGTERM: no worker left running" none_alive "$d"

# the launcher SIGKILLed: PR_SET_PDEATHSIG takes the workers with it (Linux)
if [ "$(uname -s)" = Linux ]; then
  d="$tmp/kill"; mkdir "$d"
  start_bg "$d" env D="$d" "$launcher" -n 3 sh -c "$sleeper"
  wait_files "$d" 3
  kill -KILL "$lpid"; wait "$lpid" 2>/dev/null; rc=$?
  out=""; err=""
  check "SIGKILLed launcher: no orphan worker left running" none_alive "$d"
else
  n=$((n+1)); echo "ok $n - SIGKILLed launcher # SKIP PR_SET_PDEATHSIG is Linux's"
fi

# ------------------------------------------------------------- command line
run --help
check "--help: exit 0, usage on stdout" eval '[ "$rc" -eq 0 ] && has "$out" "usage: tptrain-run [options] [--] PROGRAM [ARGS...]" && [ -z "$err" ]'
run -h
check "-h: exit 0" test "$rc" -eq 0

# bad ARGS... | message: exit 2, one line on stderr with the message, PROGRAM not run
bad() {
  local msg=$1; shift
  rm -f "$tmp/ran"
  run "$@"
  local args="$*"
  check "bad command line (${args//"$tmp"\/ran/FILE}): exit 2 with \"$msg\"" \
    eval '[ "$rc" -eq 2 ] && [ "$(lines "$err")" -eq 1 ] && has "$err" "$msg" && [ ! -e "$tmp/ran" ]'
}
ran=(touch "$tmp/ran")
bad "-n: 0 is out of range [1, 4096]" -n 0 "${ran[@]}"
bad "--nproc-per-node: 'abc' is not an integer" --nproc-per-node abc "${ran[@]}"
bad "-n: '2x' is not an integer" -n2x "${ran[@]}"
bad "--nproc-per-node: 'gpu' is not supported here" --nproc-per-node gpu "${ran[@]}"
bad "--nnodes: 0 is out of range" --nnodes 0 "${ran[@]}"
bad "elastic ranges (MIN:MAX) are not supported" --nnodes 1:2 "${ran[@]}"
bad "--node-rank 2 is not below --nnodes 2" --nnodes 2 --node-rank 2 "${ran[@]}"
bad "--node-rank 1 is not below --nnodes 1" --node-rank 1 "${ran[@]}"
bad "--node-rank: -1 is out of range" --node-rank -1 "${ran[@]}"
bad "--master-port: 70000 is out of range [1, 65535]" --master-port 70000 "${ran[@]}"
bad "--master-port: 'http' is not an integer" --master-port http "${ran[@]}"
bad "--master-addr: '' is not a host name or address" --master-addr "" "${ran[@]}"
bad "--run-id: the run id must not be empty" --run-id= "${ran[@]}"
bad "--grace-seconds: '-1' is not a number of seconds" --grace-seconds -1 "${ran[@]}"
bad "unknown option '--bogus'" --bogus "${ran[@]}"
bad "unknown option '-x'" -x "${ran[@]}"
bad "--no-prefix takes no value" --no-prefix=1 "${ran[@]}"
bad "-n needs a value" -n
bad "no PROGRAM given" -n 2
bad "no PROGRAM given" -n 2 --

# PROGRAM missing or not executable
run -n 2 "$tmp/no-such-program"
check "missing PROGRAM path: exit 127, one clear line" \
  eval '[ "$rc" -eq 127 ] && [ "$err" = "tptrain-run: $tmp/no-such-program: No such file or directory" ]'
run -n 2 tptrain-run-no-such-command
check "PROGRAM not on PATH: exit 127, one clear line" \
  eval '[ "$rc" -eq 127 ] && [ "$err" = "tptrain-run: tptrain-run-no-such-command: command not found in PATH" ]'
printf '#!/bin/sh\necho hi\n' >"$tmp/noexec"; chmod -x "$tmp/noexec"
run "$tmp/noexec"
check "PROGRAM not executable: exit 126, one clear line" \
  eval '[ "$rc" -eq 126 ] && has "$err" "$tmp/noexec: not executable" && [ "$(lines "$err")" -eq 1 ]'
run "$tmp"
check "PROGRAM a directory: exit 126" eval '[ "$rc" -eq 126 ] && has "$err" "is a directory"'
# -- ends the options; PROGRAM found on PATH
run -n 1 -- sh -c 'echo "[$1]"' sh -n
check "-- then PROGRAM on PATH with its own options" eval '[ "$rc" -eq 0 ] && [ "$out" = "[rank 0] [-n]" ]'

echo "1..$n"
[ "$failures" -eq 0 ]
