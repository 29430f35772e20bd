#!/usr/bin/env python3
"""benchmarks/run all's harness, end to end on three short benchmarks: it
runs benchmarks/all.py --quick --rounds 2 on the build directory and reads
the table it writes. The figures themselves are not checked (tests never
assert timings); the table's arithmetic is: each row's sides are the medians
of its rounds, and its ratio is the median of the per-round ratios, oriented
so that above 1 means tptrain is ahead.

usage: test_benchmarks_all.py SOURCE_ROOT BUILD_DIR         prints TAP"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

root, build = sys.argv[1], sys.argv[2]
tests = []


def test(f):
    tests.append(f)
    return f


def run_all(out, *extra):
    return subprocess.run(["/usr/bin/python3", os.path.join(root, "benchmarks/all.py"), "--quick", "--no-build",
                           "--build", build, "--out", out] + list(extra),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=600)


tmp = tempfile.mkdtemp(prefix="tptrain-bench-test-")
md_path = os.path.join(tmp, "benchmarks.md")
proc = run_all(md_path, "--rounds", "2", "--only", "call-roundtrip,memory-growth,checkpoint")
md = open(md_path, encoding="utf-8").read() if os.path.exists(md_path) else ""


def rows():
    got = {}
    for line in md.split("\n"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 9 and re.match(r"^[a-z][a-z0-9-]*$", cells[0]) and cells[0] != "benchmark":
            got[cells[0]] = cells
    return got


def rounds():
    got = {}
    for m in re.finditer(r"^- \*\*([a-z0-9-]+)\*\*: ((?:[0-9.]+ / [0-9.]+(?:, )?)+)$", md, re.M):
        got[m.group(1)] = [tuple(float(x) for x in pair.split(" / ")) for pair in m.group(2).split(", ")]
    return got


@test
def it_runs_and_writes_the_table():
    assert proc.returncode == 0, proc.stdout
    assert "wrote " in proc.stdout, proc.stdout
    for part in ["# Benchmarks", "## Machine", "## Versions", "## Results", "## Every round",
                 "| LibTorch (libtorch-dev) |", "| python3-torch |", "2 rounds only", "smoke test"]:
        assert part in md, "%r missing from the table:\n%s" % (part, md)


@test
def every_row_has_figures_from_both_sides():
    r = rows()
    assert set(r) == {"call-roundtrip", "memory-growth", "checkpoint-save", "checkpoint-restore"}, sorted(r)
    for key, cells in r.items():
        for c in cells[3:8]:
            assert re.match(r"^\**[0-9.]+\**$", c), "%s: %r is not a figure" % (key, c)
        assert cells[1] in ("ns/call", "MB", "ms"), cells


@test
def ratios_are_medians_of_per_round_ratios_oriented_for_tptrain():
    r, per = rows(), rounds()
    assert set(per) == set(r), (sorted(per), sorted(r))
    for key, pairs in per.items():
        assert len(pairs) == 2, (key, pairs)
        lower = r[key][1] in ("ns/call", "MB", "ms")  # times and memory: less is better
        ratios = [b / t if lower else t / b for b, t in pairs]
        want = statistics.median(ratios)
        got = float(r[key][5].strip("*"))
        # the per-round figures are printed rounded: allow for it
        assert abs(got - want) <= 0.02 * want + 0.002, (key, got, want, pairs)
        assert float(r[key][6]) <= got <= float(r[key][7]), r[key]
        assert abs(float(r[key][3]) - statistics.median(b for b, _ in pairs)) <= 0.01 * float(r[key][3]) + 0.01
        assert abs(float(r[key][4]) - statistics.median(t for _, t in pairs)) <= 0.01 * float(r[key][4]) + 0.01


@test
def memory_is_read_after_both_step_counts():
    per = rounds()["memory-growth"]
    for b, t in per:
        assert 10 < b < 10000 and 10 < t < 10000, per  # MB, resident


@test
def an_unknown_benchmark_is_named():
    p = run_all(os.path.join(tmp, "x.md"), "--only", "call-roundtrip,nope")
    assert p.returncode == 2 and "unknown benchmark 'nope'" in p.stdout, p.stdout
    assert not os.path.exists(os.path.join(tmp, "x.md"))


@test
def a_partial_run_leaves_the_committed_table_alone():
    docs = os.path.join(root, "docs/benchmarks.md")
    before = open(docs, encoding="utf-8").read() if os.path.exists(docs) else None
    p = subprocess.run(["/usr/bin/python3", os.path.join(root, "benchmarks/all.py"), "--quick", "--no-build",
                        "--build", build, "--rounds", "1", "--only", "call-roundtrip"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=600)
    assert p.returncode == 0, p.stdout
    partial = os.path.join(build, "benchmarks-partial.md")
    assert os.path.exists(partial) and "| call-roundtrip |" in open(partial, encoding="utf-8").read(), p.stdout
    after = open(docs, encoding="utf-8").read() if os.path.exists(docs) else None
    assert before == after, "a partial run rewrote docs/benchmarks.md"


print("TAP version 13")
print("1..%d" % len(tests))
bad = 0
for n, f in enumerate(tests, 1):
    try:
        f()
        print("ok %d - %s" % (n, f.__name__))
    except AssertionError as e:
        bad += 1
        print("not ok %d - %s" % (n, f.__name__))
        for line in str(e).split("\n")[:60]:
            print("#   " + line)
shutil.rmtree(tmp, ignore_errors=True)
sys.exit(1 if bad else 0)
