#!/usr/bin/env bash
# The fuzz run of the test command (scripts/dev test): builds the fuzz
# targets with clang's libFuzzer under ASan + UBSan and runs each for a while.
#
#   tests/fuzz/run.sh BUILD_DIR [SECONDS]      (default 60 seconds per target)
#
# The readers (src/base/pickle.cpp, torch_save.cpp, checkpoint_file.cpp) are
# compiled here, instrumented, with BUILD_DIR's flags; the rest of the
# library comes from BUILD_DIR/libtptrain_core.a (built by `ninja -C
# BUILD_DIR`, uninstrumented, as LibTorch is). Each target starts from its
# seeds: tests/fuzz/corpus/<target>/ (real files: a tptrain checkpoint's
# archive, python3-torch's torch.save and torch.jit.save files; and every
# input that ever crashed a target, kept as a regression case) and the
# crafted files of tests/misuse/gen_crafted.py. A finding fails the run and
# leaves its input as BUILD_DIR/fuzz/crash-<target>-*: add it to the corpus
# with the fix.
set -euo pipefail
build=$(cd "$1" && pwd)
secs=${2:-60}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$build/fuzz
mkdir -p "$out"
cxx=${FUZZ_CXX:-clang++}
command -v "$cxx" >/dev/null || { echo "tests/fuzz/run.sh: $cxx not found (Debian: clang, libclang-rt-dev)" >&2; exit 1; }

# The include paths and definitions BUILD_DIR compiles the library with.
mapfile -t flags < <(python3 - "$build/compile_commands.json" <<'PY'
import json, os, shlex, sys
for e in json.load(open(sys.argv[1])):
    if e["file"].endswith("src/base/pickle.cpp"):
        args, d, out, i = shlex.split(e["command"]), e["directory"], [], 0
        while i < len(args):
            a = args[i]
            if a in ("-I", "-isystem"):
                out += [a, os.path.join(d, args[i + 1])]; i += 1
            elif a.startswith("-I"):
                out.append("-I" + os.path.join(d, a[2:]))
            elif a.startswith("-D") or a.startswith("-std="):
                out.append(a)
            i += 1
        print("\n".join(out))
        break
PY
)
# The libraries libtptrain.so links, from where it finds them.
libs=()
while read -r lib; do
  case "$lib" in libc.so*|libm.so*|libgcc_s.so*|libstdc++.so*|ld-linux*) ;; *) libs+=("-l:$lib") ;; esac
done < <(readelf -d "$build/libtptrain.so" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p')
for p in $(readelf -d "$build/libtptrain.so" | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p' | tr ':' ' '); do
  libs+=("-L$p" "-Wl,-rpath,$p")
done

san=(-fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=undefined)
opt=(-O1 -g -fno-omit-frame-pointer -w)
start=$SECONDS
objs=()
for f in pickle torch_save checkpoint_file; do
  "$cxx" "${flags[@]}" "${opt[@]}" "${san[@]}" -fsanitize=fuzzer-no-link -c "$src/src/base/$f.cpp" -o "$out/$f.o" &
  objs+=("$out/$f.o")
  [ "$f" = torch_save ] && wait  # two compilers at a time
done
wait
for t in checkpoint torch_save; do
  "$cxx" "${flags[@]}" "${opt[@]}" "${san[@]}" -fsanitize=fuzzer "$src/tests/fuzz/fuzz_$t.cpp" "${objs[@]}" \
    "$build/libtptrain_core.a" "${libs[@]}" -lpthread -o "$out/fuzz_$t"
done
echo "# fuzz targets built in $((SECONDS - start)) s"

# Seeds: the corpus and the crafted files (small ones: big seeds slow every mutation).
rm -rf "$out/crafted" && python3 "$src/tests/misuse/gen_crafted.py" --out "$out/crafted" >/dev/null
for t in checkpoint torch_save; do
  rm -rf "$out/seeds-$t" "$out/found-$t" && mkdir -p "$out/seeds-$t" "$out/found-$t"
  cp "$src/tests/fuzz/corpus/$t"/* "$out/seeds-$t/"
done
for f in "$out/crafted"/*.ckpt; do  # the checkpoint target adds the trailer itself
  [ "$(stat -c %s "$f")" -le 65536 ] && head -c -24 "$f" > "$out/seeds-checkpoint/$(basename "$f")"
done
for f in "$out/crafted"/*.pt; do
  [ "$(stat -c %s "$f")" -le 65536 ] && cp "$f" "$out/seeds-torch_save/"
done

rc=0
for t in checkpoint torch_save; do
  echo "# fuzz_$t: $secs s from $(ls "$out/seeds-$t" | wc -l) seeds"
  ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:detect_odr_violation=0 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$out/fuzz_$t" -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 -malloc_limit_mb=2048 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="$out/crash-$t-" "$out/found-$t" "$out/seeds-$t" \
      > "$out/fuzz_$t.log" 2>&1 || { rc=1; tail -60 "$out/fuzz_$t.log"; }
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb|cov:" "$out/fuzz_$t.log" | tail -3 || true
done
[ "$rc" -eq 0 ] && echo "# fuzz run clean" || echo "# fuzz run found something: $out/crash-*" >&2
exit "$rc"
