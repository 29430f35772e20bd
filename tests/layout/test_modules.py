#!/usr/bin/env python3
"""The C API's modules (docs/ARCHITECTURE.md): include/tptrain.h is an
umbrella over include/tptrain/<module>.h, and each module header that
declares functions has one src/capi/<module>.cpp that defines exactly those
functions. Also: every module header is included by the umbrella, and every
function prefix (tpt_trainer_, tpt_dataflow_, ...) lives in one header.

Usage: test_modules.py SOURCE_ROOT   (TAP output)
"""
import os
import re
import sys

from tap import report

DECL = re.compile(r"\b(tpt_\w+)\s*\(")
DEF = re.compile(r"^[A-Za-z_][\w\s\*]*?\b(tpt_\w+)\s*\(")  # at column 0: a definition
MACRO_DEF = re.compile(r"^TPT_ARITH\((tpt_\w+)")  # op.cpp's element-wise pairs


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def declared(path):
    names = set()
    for stmt in strip_comments(open(path, encoding="utf-8").read()).split(";"):
        if "TPT_API" in stmt:
            m = DECL.search(stmt[stmt.index("TPT_API"):])
            if m:
                names.add(m.group(1))
    return names


def defined(path):
    names = set()
    for line in open(path, encoding="utf-8"):
        m = DEF.match(line)
        if m and not line.startswith("using ") and not line.rstrip().endswith(");"):
            names.add(m.group(1))
        m = MACRO_DEF.match(line)
        if m:
            names |= {m.group(1), m.group(1) + "_scalar"}
    return names


def prefix(name):
    parts = name.split("_")
    return "_".join(parts[:2]) + "_" if len(parts) > 2 else name


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    inc = os.path.join(root, "include")
    capi = os.path.join(root, "src", "capi")
    results = []

    def check(ok, what, detail=""):
        results.append((ok, what, detail))

    umbrella = open(os.path.join(inc, "tptrain.h"), encoding="utf-8").read()
    modules = sorted(f[:-2] for f in os.listdir(os.path.join(inc, "tptrain")) if f.endswith(".h"))
    included = re.findall(r'#include "tptrain/(\w+)\.h"', umbrella)
    check(sorted(included) == modules, "tptrain.h includes every module header, each once",
          "modules: %s; included: %s" % (modules, included))
    check(not DECL.search(strip_comments(umbrella)), "tptrain.h itself declares nothing")

    decls = {m: declared(os.path.join(inc, "tptrain", m + ".h")) for m in modules}
    cpps = sorted(f[:-4] for f in os.listdir(capi) if f.endswith(".cpp"))
    with_functions = [m for m in modules if decls[m]]
    check(cpps == with_functions, "src/capi/ has one <module>.cpp per module header with functions",
          "module headers with functions: %s; src/capi/*.cpp: %s" % (with_functions, cpps))
    for m in with_functions:
        path = os.path.join(capi, m + ".cpp")
        if not os.path.exists(path):
            continue
        d = defined(path)
        missing, extra = sorted(decls[m] - d), sorted(d - decls[m])
        check(not missing and not extra, "src/capi/%s.cpp defines exactly tptrain/%s.h's functions" % (m, m),
              ("declared there, defined elsewhere or nowhere: %s\n" % ", ".join(missing) if missing else "") +
              ("defined here, declared in another module: %s" % ", ".join(extra) if extra else ""))

    homes = {}
    for m in modules:
        for n in decls[m]:
            homes.setdefault(prefix(n), set()).add(m)
    split = {p: sorted(ms) for p, ms in homes.items() if len(ms) > 1}
    check(not split, "every function prefix lives in one module header",
          "\n".join("%s in %s" % (p, ", ".join(ms)) for p, ms in sorted(split.items())))

    return report(results)


if __name__ == "__main__":
    sys.exit(main())
