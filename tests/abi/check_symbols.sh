#!/bin/sh
# Only tpt_ symbols are exported, and exactly the committed list of them.
# usage: check_symbols.sh libtptrain.so symbols.txt   (TAP output)
set -u
lib=$1 list=$2
echo "TAP version 13"
echo "1..3"
actual=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TtDdBbRrVvWwiu]$/ {print $3}' | sed 's/@.*//' | sort -u)
bad=$(printf '%s\n' "$actual" | grep -v '^tpt_' || true)
if [ -z "$bad" ]; then echo "ok 1 - every exported symbol starts with tpt_"; else
  echo "not ok 1 - symbols without the tpt_ prefix are exported:"; printf '%s\n' "$bad" | head -20 | sed 's/^/#   /'; fi
if d=$(printf '%s\n' "$actual" | diff -u "$list" - ); then echo "ok 2 - exports match tests/abi/symbols.txt ($(printf '%s\n' "$actual" | wc -l) symbols)"; else
  echo "not ok 2 - exports differ from tests/abi/symbols.txt (update it when the ABI grows):"; printf '%s\n' "$d" | sed 's/^/#   /'; fi
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
case "$soname" in
  libtptrain.so.[0-9]*) echo "ok 3 - SONAME $soname carries the ABI version";;
  *) echo "not ok 3 - SONAME is '$soname'";;
esac
