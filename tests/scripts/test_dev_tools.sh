#!/usr/bin/env bash
# The version checks of scripts/dev (`scripts/dev tools`) against fake rustc,
# cargo, go and meson scripts reporting old versions. No real apt-get runs:
# TPTRAIN_DEV_APT_GET names a fake one that records what it was asked to
# install and, depending on FAKE_APT, "installs" a new enough tool, does
# nothing, or fails. PATH holds only the fakes and the few utilities that
# scripts/dev uses, so the machine's own toolchains are never seen. TAP output.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The utilities scripts/dev needs, and nothing else.
util="$tmp/util"; mkdir -p "$util"
for u in bash env sed sort head dirname cat id chmod; do
  p=$(command -v "$u") || { echo "1..0 # SKIP $u not found"; exit 0; }
  ln -s "$p" "$util/$u"
done

fake="$tmp/fake"
# tool NAME OUTPUT: a fake command printing OUTPUT for any arguments.
tool() { printf '#!%s\necho "%s"\n' "$util/bash" "$2" >"$fake/$1"; chmod +x "$fake/$1"; }
reset_fakes() {
  rm -rf "$fake"; mkdir -p "$fake"
  tool meson "1.0.1"
  tool go "go version go1.19.8 linux/amd64"
  tool rustc "rustc 1.85.0 (4d91de4e4 2025-02-17) (built from a source tarball)"
  tool cargo "cargo 1.85.0 (d73d2caf9 2024-12-31)"
}

# The fake apt-get: records its arguments; FAKE_APT=upgrade writes new enough
# versions of what it was asked for, noop leaves everything, fail exits 100.
cat >"$tmp/apt-get" <<EOS
#!$util/bash
echo "\$*" >>"$tmp/apt.log"
case "\$FAKE_APT" in
  fail) exit 100 ;;
  noop) exit 0 ;;
esac
for p in "\$@"; do
  case "\$p" in
    rustc-web) printf '#!$util/bash\necho "rustc 1.85.0 (debian)"\n' >"$fake/rustc"; "$util/chmod" +x "$fake/rustc" ;;
    cargo-web) printf '#!$util/bash\necho "cargo 1.85.0 (debian)"\n' >"$fake/cargo"; "$util/chmod" +x "$fake/cargo" ;;
    golang-go) printf '#!$util/bash\necho "go version go1.19.8 linux/amd64"\n' >"$fake/go"; "$util/chmod" +x "$fake/go" ;;
    meson) printf '#!$util/bash\necho "1.0.1"\n' >"$fake/meson"; "$util/chmod" +x "$fake/meson" ;;
  esac
done
EOS
chmod +x "$tmp/apt-get"

n=0 failures=0
# run FAKE_APT: runs `scripts/dev tools`, leaving out/err/rc/apt.
run() {
  rm -f "$tmp/apt.log"; : >"$tmp/apt.log"
  FAKE_APT=$1 TPTRAIN_DEV_APT_GET="$tmp/apt-get" PATH="$fake:$util" \
    "$util/bash" "$root/scripts/dev" tools >"$tmp/out" 2>"$tmp/err"
  rc=$?
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err"); apt=$(cat "$tmp/apt.log")
}
# check NAME CONDITION...: one TAP line; on failure, what the run printed.
check() {
  local name=$1; shift
  n=$((n+1))
  if "$@"; then echo "ok $n - $name"
  else
    failures=$((failures+1)); echo "not ok $n - $name"
    { echo "rc=$rc"; echo "apt: $apt"; echo "stdout:"; echo "$out"; echo "stderr:"; echo "$err"; } | sed 's/^/#   /'
  fi
}
has() { case "$1" in *"$2"*) return 0;; *) return 1;; esac; }
lines() { printf '%s\n' "$1" | grep -c . ; }

echo "TAP version 13"

# Every tool new enough: nothing installed, the versions printed.
reset_fakes; run upgrade
check "new enough tools: exit 0" test "$rc" -eq 0
check "new enough tools: no apt-get call" test -z "$apt"
check "new enough tools: versions printed" has "$out" "tools: meson 1.0.1, go 1.19.8, rustc 1.85.0, cargo 1.85.0"

# Debian 12's own rustc 1.63 / cargo 0.66: rustc-web and cargo-web installed, said so.
reset_fakes; tool rustc "rustc 1.63.0"; tool cargo "cargo 0.66.0"; run upgrade
check "rustc 1.63: exit 0 after installing" test "$rc" -eq 0
check "rustc 1.63: installs rustc-web cargo-web" test "$apt" = "install rustc-web cargo-web"
check "rustc 1.63: says why (found, needed, where from)" \
  has "$out" "rustc 1.63.0 found at $fake/rustc, 1.70 or newer needed (rust-version in bindings/rust/Cargo.toml): installing Debian's rustc-web cargo-web"
check "rustc 1.63: the new version printed" has "$out" "rustc 1.85.0, cargo 1.85.0"

# The install does not help (an old rustc first on PATH): one clear line, exit 1.
reset_fakes; tool rustc "rustc 1.63.0"; run noop
check "rustc 1.63, install does not help: exit 1" test "$rc" -eq 1
check "rustc 1.63, install does not help: one line on stderr" test "$(lines "$err")" -eq 1
check "rustc 1.63, install does not help: names tool, found, needed" \
  has "$err" "scripts/dev: rustc 1.63.0 found at $fake/rustc, 1.70 or newer needed (rust-version in bindings/rust/Cargo.toml), even after installing Debian's rustc-web cargo-web"

# apt-get fails: one clear line, exit 1.
reset_fakes; tool rustc "rustc 1.63.0"; run fail
check "apt-get fails: exit 1" test "$rc" -eq 1
check "apt-get fails: says so in one line" \
  test "$(printf '%s\n' "$err" | tail -n1)" = "scripts/dev: rustc 1.63.0 found at $fake/rustc, 1.70 or newer needed (rust-version in bindings/rust/Cargo.toml), and installing Debian's rustc-web cargo-web failed"

# No rustc at all; and rustc without cargo.
reset_fakes; rm "$fake/rustc" "$fake/cargo"; run upgrade
check "no rustc: installs rustc-web cargo-web" test "$apt" = "install rustc-web cargo-web"
check "no rustc: says so" has "$out" "rustc not found, 1.70 or newer needed"
check "no rustc: exit 0 after installing" test "$rc" -eq 0
reset_fakes; rm "$fake/cargo"; run upgrade
check "no cargo: installs rustc-web cargo-web" test "$apt" = "install rustc-web cargo-web"
check "no cargo: says so" has "$out" "cargo not found"

# Go older than go.mod's go line.
reset_fakes; tool go "go version go1.18.1 linux/amd64"; run upgrade
check "go 1.18: installs golang-go" test "$apt" = "install golang-go"
check "go 1.18: says why" \
  has "$out" "go 1.18.1 found at $fake/go, 1.19 or newer needed (the go line of bindings/go/go.mod)"
check "go 1.18: exit 0 after installing" test "$rc" -eq 0
reset_fakes; tool go "go version go1.18.1 linux/amd64"; run noop
check "go 1.18, install does not help: exit 1 with one line" test "$rc" -eq 1 -a "$(lines "$err")" -eq 1
check "go 1.18, install does not help: names go, found, needed" has "$err" "go 1.18.1 found at $fake/go, 1.19 or newer needed"

# Meson older than meson_version.
reset_fakes; tool meson "0.63.3"; run upgrade
check "meson 0.63: installs meson ninja-build" test "$apt" = "install meson ninja-build"
check "meson 0.63: says why" \
  has "$out" "meson 0.63.3 found at $fake/meson, 1.0.0 or newer needed (meson_version in meson.build)"
reset_fakes; tool meson "0.63.3"; run noop
check "meson 0.63, install does not help: names meson, found, needed" \
  has "$err" "meson 0.63.3 found at $fake/meson, 1.0.0 or newer needed"

# Version comparison is numeric, not textual: 1.100 is newer than 1.70, 1.9 is older.
reset_fakes; tool rustc "rustc 1.100.0"; tool cargo "cargo 1.100.0"; run noop
check "rustc 1.100 counts as newer than 1.70" test "$rc" -eq 0 -a -z "$apt"
reset_fakes; tool rustc "rustc 1.9.0"; run noop
check "rustc 1.9 counts as older than 1.70" test "$rc" -eq 1

# The needed versions come from the tree, not from the script.
need=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' "$root/bindings/rust/Cargo.toml")
check "the Rust version needed is the crates' rust-version ($need)" test "$need" = "1.70"

# Several tools old at once: each installed in turn (meson, go, then Rust).
reset_fakes; tool meson "0.61.0"; tool go "go version go1.15 linux/amd64"; tool rustc "rustc 1.63.0"; run upgrade
check "three old tools: three installs in order" \
  test "$apt" = "$(printf 'install meson ninja-build\ninstall golang-go\ninstall rustc-web cargo-web')"
check "three old tools: exit 0" test "$rc" -eq 0

# Not root and no sudo: the real install path refuses in one clear line.
reset_fakes; tool rustc "rustc 1.63.0"; tool id "1000"
rm -f "$tmp/apt.log"; : >"$tmp/apt.log"
PATH="$fake:$util" "$util/bash" "$root/scripts/dev" tools >"$tmp/out" 2>"$tmp/err"
rc=$?; out=$(cat "$tmp/out"); err=$(cat "$tmp/err"); apt=""
check "not root, no sudo: exit 1" test "$rc" -eq 1
check "not root, no sudo: says root or sudo is needed" has "$err" "scripts/dev: need root (or sudo) to run: env DEBIAN_FRONTEND=noninteractive apt-get update -q"
check "not root, no sudo: then names the tool, found, needed" \
  test "$(printf '%s\n' "$err" | tail -n1)" = "scripts/dev: rustc 1.63.0 found at $fake/rustc, 1.70 or newer needed (rust-version in bindings/rust/Cargo.toml), and installing Debian's rustc-web cargo-web failed"

echo "1..$n"
[ "$failures" -eq 0 ]
