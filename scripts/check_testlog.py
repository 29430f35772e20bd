#!/usr/bin/env python3
"""Reads meson's testlog.json and fails unless every test passed and ran at
least one TAP subtest; prints a table of counts per suite, then the last lines
of each failing suite's output (so that the end of a long log, all that a CI
page may show, says what failed and why)."""
import json
import re
import sys

path = sys.argv[1]
TAIL = 40
rows, bad, tails = [], [], []
with open(path) as f:
    for line in f:
        if not line.strip():
            continue
        t = json.loads(line)
        out = t.get("stdout") or ""
        passed = len(re.findall(r"^ok \d+", out, re.M))
        failed = len(re.findall(r"^not ok \d+", out, re.M))
        skipped = len(re.findall(r"^ok \d+.*# SKIP", out, re.M | re.I))
        rows.append((t["name"], t["result"], passed - skipped, failed, skipped))
        if t["result"] != "OK" or failed or passed - skipped == 0:
            bad.append(t["name"])
            lines = ((out or "") + (t.get("stderr") or "")).rstrip("\n").split("\n")
            tails.append((t["name"], t["result"], [l for l in lines if l.startswith("not ok")], lines[-TAIL:]))
width = max((len(r[0]) for r in rows), default=10)
print(f"\n{'suite'.ljust(width)}  result  passed  failed  skipped")
for name, result, p, fl, s in rows:
    print(f"{name.ljust(width)}  {result:6}  {p:6}  {fl:6}  {s:7}")
print(f"{'total'.ljust(width)}          {sum(r[2] for r in rows):6}  {sum(r[3] for r in rows):6}  {sum(r[4] for r in rows):7}")
if not rows:
    print("no tests ran", file=sys.stderr)
    sys.exit(1)
for name, result, notok, lines in tails:
    print(f"\n---- {name} ({result}): {len(notok)} failed subtests", file=sys.stderr)
    print("\n".join(notok[:20]), file=sys.stderr)
    print(f"---- {name}: the last {len(lines)} lines of its output", file=sys.stderr)
    print("\n".join(lines), file=sys.stderr)
if bad:
    print("failed, or ran zero tests: " + ", ".join(bad), file=sys.stderr)
    sys.exit(1)
