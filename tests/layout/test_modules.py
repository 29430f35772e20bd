#!/usr/bin/env python3
"""The C API's modules (docs/ARCHITECTURE.md): include/tptrain.h is an
umbrella over include/tptrain/<module>.h, and each module header that
declares functions has one src/capi/<module>.cpp that defines exactly those
functions. Also: every module header is included by the umbrella, and every
function prefix (tpt_trainer_, tpt_dataflow_, ...) lives in one header.

The bindings follow the same modules: each module header has a Rust module
file bindings/rust/tptrain/src/<module>.rs (its second files in
src/<module>/) and a Go file bindings/go/tptrain/<module>.go (its second files
<module>_<part>.go); every other file is one of the listed plumbing files;
and each C function a binding calls is wrapped in its module's files (it may
be called elsewhere too, e.g. to free a handle on a failure path).

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

    check_bindings(root, decls, check)
    return report(results)


# The bindings' files that belong to no module: the crate root and the
# helpers under every module (docs/ARCHITECTURE.md).
RUST_PLUMBING = {"lib", "binding", "cstr", "panic"}
GO_PLUMBING = {"doc", "handle", "defaults", "trampoline_export", "trampoline_helpers", "trampoline"}
RUST_CALL = re.compile(r"\bsys::(tpt_\w+)\s*\(")
GO_CALL = re.compile(r"\bC\.(tpt_\w+)\s*\(")


def binding_files(root, lang):
    """(relative path, module or None for plumbing, problem or None) of every
    source file of one binding."""
    if lang == "rust":
        base = os.path.join(root, "bindings", "rust", "tptrain", "src")
        for dirpath, _, files in os.walk(base):
            for f in sorted(files):
                rel = os.path.relpath(os.path.join(dirpath, f), base)
                head = rel.split(os.sep)[0]
                name = head[:-3] if head.endswith(".rs") else head
                yield base, rel, name
    else:
        base = os.path.join(root, "bindings", "go", "tptrain")
        for f in sorted(os.listdir(base)):
            if f.endswith("_test.go") or not f.endswith((".go", ".c", ".h")):
                continue
            yield base, f, f.rsplit(".", 1)[0]


def check_bindings(root, decls, check):
    modules = sorted(decls)
    owner = {n: m for m in modules for n in decls[m]}
    hdir = os.path.join(root, "include", "tptrain")
    header_names = set(re.findall(r"\btpt_\w+", "".join(
        strip_comments(open(os.path.join(hdir, m + ".h"), encoding="utf-8").read()) for m in modules)))
    for lang, plumbing, call in (("rust", RUST_PLUMBING, RUST_CALL), ("go", GO_PLUMBING, GO_CALL)):
        files, strays, callers = set(), [], {}
        for base, rel, name in binding_files(root, lang):
            files.add(rel)
            if name in plumbing:
                module = None
            elif name in decls:
                module = name
            elif lang == "go" and "_" in name and name.split("_")[0] in decls:
                module = name.split("_")[0]  # a module's second file
            else:
                strays.append(rel)
                continue
            text = strip_comments(open(os.path.join(base, rel), encoding="utf-8").read())
            for fn in set(call.findall(text)):
                callers.setdefault(fn, set()).add(module)
        ext = ".rs" if lang == "rust" else ".go"
        missing = [m + ext for m in modules if m + ext not in files]
        check(not missing, "%s: one file per module header, named as the header" % lang,
              "no file for: %s" % ", ".join(missing))
        check(not strays, "%s: every file belongs to a module header or is plumbing" % lang,
              "neither a module's (<module>%s%s) nor plumbing (%s): %s"
              % ("/..." if lang == "rust" else "_<part>", ext, ", ".join(sorted(plumbing)), ", ".join(strays)))
        # (A Go conversion to a C type, C.tpt_dtype(x), reads as a call.)
        unknown = sorted(fn for fn in callers if fn not in header_names)
        check(not unknown, "%s: calls only what the headers declare" % lang, ", ".join(unknown))
        astray = sorted("%s (%s.h) only from %s" % (fn, owner[fn], ", ".join(sorted(m or "plumbing" for m in ms)))
                        for fn, ms in callers.items() if fn in owner and owner[fn] not in ms)
        check(not astray, "%s: each C function is wrapped in its module's files" % lang, "\n".join(astray))


if __name__ == "__main__":
    sys.exit(main())
