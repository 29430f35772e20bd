#!/usr/bin/env python3
"""tools/tptrain-plot: two runs' stats.json (one with a scalar the other
lacks, one with a value <= 0) drawn into an SVG that parses as XML, with
one path per run and scalar; the log scale, the defaults, and errors.
Prints TAP. usage: test_plot.py PATH/TO/tptrain-plot"""
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

PLOT = sys.argv[1]
SVG = "{http://www.w3.org/2000/svg}"


def run(*args):
    return subprocess.run([sys.executable, PLOT] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=60)


def paths(svg_text):
    root = ET.fromstring(svg_text)
    assert root.tag == SVG + "svg", root.tag
    out = {}
    for g in root.iter(SVG + "g"):
        scalar = g.get("data-scalar")
        out[scalar] = [p.get("data-run") for p in g.iter(SVG + "path")]
        for p in g.iter(SVG + "path"):
            d = p.get("d")
            assert d.startswith("M") and all(len(pt.split(",")) == 2 for pt in d[1:].split(" L")), d
    return out


def main():
    tmp = tempfile.mkdtemp(prefix="tpt_plot_")
    a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
    os.makedirs(a), os.makedirs(b)
    with open(os.path.join(a, "stats.json"), "w") as f:
        json.dump([{"global_step": 10 * i, "epoch_num": i, "cost": 1.0 / i, "accuracy": 0.5 + 0.1 * i}
                   for i in range(1, 6)], f)
    with open(os.path.join(b, "stats.json"), "w") as f:
        json.dump([{"global_step": 10 * i, "epoch_num": i, "cost": 0.0 if i == 1 else 2.0 / i}
                   for i in range(1, 4)], f)
    checks = []

    def check(name, fn):
        try:
            fn()
            checks.append((True, name, ""))
        except Exception as e:  # noqa: BLE001
            checks.append((False, name, repr(e)))

    def two_runs():
        out = os.path.join(tmp, "two.svg")
        r = run("-o", out, "-s", "cost", "-s", "accuracy", "--title", "a & b", "first=" + a, os.path.join(b, "stats.json"))
        assert r.returncode == 0, r.stderr
        with open(out) as f:
            got = paths(f.read())
        assert got == {"cost": ["first", "b"], "accuracy": ["first"]}, got
    check("two runs: valid XML, one path per run and scalar", two_runs)

    def defaults_to_stdout():
        r = run(a, b)
        assert r.returncode == 0, r.stderr
        got = paths(r.stdout.decode())
        assert list(got) == ["cost", "accuracy"], got  # every scalar but the counters, in order
    check("every scalar by default, to standard output", defaults_to_stdout)

    def log_scale():
        r = run("--log", "-s", "cost", a, b)
        assert r.returncode == 0, r.stderr
        assert b"left out of the log scale" in r.stderr, r.stderr
        assert paths(r.stdout.decode()) == {"cost": ["a", "b"]}
        assert b"(log scale)" in r.stdout
    check("--log leaves out values <= 0, with a warning", log_scale)

    def by_epoch():
        r = run("--x", "epoch_num", "-s", "cost", a)
        assert r.returncode == 0 and b">epoch_num<" in r.stdout, r.stderr
    check("--x epoch_num", by_epoch)

    def errors():
        r = run(os.path.join(tmp, "missing"))
        assert r.returncode == 1 and b"missing" in r.stderr, (r.returncode, r.stderr)
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            f.write('{"not": "a list"}')
        r = run(bad)
        assert r.returncode == 1 and b"not a stats.json" in r.stderr, r.stderr
    check("a missing or malformed file is an error naming it", errors)

    print("TAP version 13")
    for i, (ok, name, why) in enumerate(checks, 1):
        print("%s %d - %s" % ("ok" if ok else "not ok", i, name))
        if why:
            print("#   " + why)
    print("1..%d" % len(checks))
    return 0 if all(ok for ok, _, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
