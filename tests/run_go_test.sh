#!/bin/sh
# Runs `go test -race -v` on bindings/go against the uninstalled .pc of the
# build tree (no install) and reports in TAP. Needs TPT_BUILD_ROOT and TPT_SOURCE_ROOT.
set -u
export PKG_CONFIG_PATH="$TPT_BUILD_ROOT/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$TPT_BUILD_ROOT${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CGO_ENABLED=1
export GOFLAGS=-mod=mod
: "${GOCACHE:=$TPT_BUILD_ROOT/go-cache}"; export GOCACHE
: "${GOPATH:=$TPT_BUILD_ROOT/go-path}"; export GOPATH
export GOPROXY=off GOTOOLCHAIN=local
log="$TPT_BUILD_ROOT/go-test.log"
race=-race
[ "${TPT_GO_RACE:-1}" = 0 ] && race=
cd "$TPT_SOURCE_ROOT/bindings/go" || exit 1
go test $race -count=1 -v ./... >"$log" 2>&1
rc=$?
echo "TAP version 13"
n=0
while IFS= read -r line; do
  case "$line" in
    "--- PASS: "*) n=$((n+1)); echo "ok $n - ${line#--- PASS: }";;
    "--- FAIL: "*) n=$((n+1)); echo "not ok $n - ${line#--- FAIL: }";;
    "--- SKIP: "*) n=$((n+1)); echo "ok $n - ${line#--- SKIP: } # SKIP";;
    "    --- PASS: "*) n=$((n+1)); echo "ok $n - ${line#    --- PASS: }";;
    "    --- FAIL: "*) n=$((n+1)); echo "not ok $n - ${line#    --- FAIL: }";;
  esac
done <"$log"
if [ "$rc" -ne 0 ]; then n=$((n+1)); echo "not ok $n - go test exited $rc"; sed 's/^/#   /' "$log" | tail -60; fi
if [ "$n" -eq 0 ]; then n=1; echo "not ok 1 - go test ran no tests"; sed 's/^/#   /' "$log" | tail -40; fi
echo "1..$n"
