#!/usr/bin/env python3
"""Reads meson's testlog.json and fails unless every test passed and ran at
least one TAP subtest; prints a table of counts per suite."""
import json
import re
import sys

path = sys.argv[1]
rows, bad = [], []
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
width = max((len(r[0]) for r in rows), default=10)
print(f"\n{'suite'.ljust(width)}  result  passed  failed  skipped")
for name, result, p, fl, s in rows:
    print(f"{name.ljust(width)}  {result:6}  {p:6}  {fl:6}  {s:7}")
print(f"{'total'.ljust(width)}          {sum(r[2] for r in rows):6}  {sum(r[3] for r in rows):6}  {sum(r[4] for r in rows):7}")
if not rows:
    print("no tests ran", file=sys.stderr)
    sys.exit(1)
if bad:
    print("failed, or ran zero tests: " + ", ".join(bad), file=sys.stderr)
    sys.exit(1)
