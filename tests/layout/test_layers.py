#!/usr/bin/env python3
"""The layers of src/ (docs/ARCHITECTURE.md): every `#include "..."` inside
src/ goes to the includer's own folder or to a lower layer, never sideways
or up. Folders of one rank stand side by side and may not include each
other. A folder that is not in LAYERS fails the test: a new room needs a
place in the order (and a line in docs/ARCHITECTURE.md) first.

Also: only src/capi/ defines the C ABI's functions (a `tpt_...(`
definition at the start of a line elsewhere fails), and "tptrain.h" with its
module headers "tptrain/<module>.h" is the public vocabulary (enums, codes,
option structs) that every layer may include.

Usage: test_layers.py SOURCE_ROOT   (TAP output)
"""
import os
import re
import sys

from tap import report

# Lower numbers are lower layers. Same number: side by side.
LAYERS = {
    "base": 0,
    "data": 1,
    "dist": 1,
    "loop": 1,
    "model": 1,
    "train": 2,
    "capi": 3,
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# A function definition whose name starts with tpt_ (its return type first).
ABI_DEFINITION = re.compile(r"^(?:extern\s+\"C\"\s+)?[A-Za-z_][\w\s\*]*?\btpt_\w+\s*\(")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    src = os.path.join(root, "src")
    results = []

    def check(ok, what, detail=""):
        results.append((ok, what, detail))

    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    unknown = [d for d in folders if d not in LAYERS]
    check(not unknown, "every folder of src/ has a layer",
          "no layer for: " + ", ".join(unknown) + " (add it to LAYERS here and to docs/ARCHITECTURE.md)")
    arch = open(os.path.join(root, "docs", "ARCHITECTURE.md"), encoding="utf-8").read()
    undocumented = [d for d in folders if "src/%s/" % d not in arch]
    check(not undocumented, "docs/ARCHITECTURE.md names every folder of src/",
          "not named there: " + ", ".join(undocumented))

    against, unresolved, outside_abi = [], [], []
    for folder in folders:
        for dirpath, _, names in os.walk(os.path.join(src, folder)):
            for name in sorted(names):
                if not name.endswith((".cpp", ".hpp", ".h", ".c", ".cu")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, src)
                with open(path, encoding="utf-8") as f:
                    lines = f.readlines()
                for n, line in enumerate(lines, 1):
                    m = INCLUDE.match(line)
                    if m:
                        inc = m.group(1)
                        if inc == "tptrain.h" or (inc.startswith("tptrain/") and os.path.exists(os.path.join(root, "include", inc))):
                            continue  # the public vocabulary
                        target = inc.split("/", 1)[0] if "/" in inc else None
                        if target is None or not os.path.exists(os.path.join(src, inc)):
                            unresolved.append("src/%s:%d includes \"%s\" (write the path from src/: \"folder/file\")" % (rel, n, inc))
                            continue
                        if target == folder:
                            continue
                        if target not in LAYERS or folder not in LAYERS or LAYERS[target] >= LAYERS[folder]:
                            how = "side by side" if LAYERS.get(target) == LAYERS.get(folder) else "a higher layer"
                            below = sorted(d for d in LAYERS if LAYERS[d] < LAYERS.get(folder, -1))
                            against.append("src/%s:%d includes %s (%s: %s/ may include %s)" % (
                                rel, n, inc, how, folder,
                                "only its own files" if not below else "its own files and " + ", ".join(d + "/" for d in below)))
                    if folder != "capi" and ABI_DEFINITION.match(line) and not line.rstrip().endswith(";"):
                        outside_abi.append("src/%s:%d: %s" % (rel, n, line.strip()))

    check(not unresolved, "every project include resolves to a file under src/", "\n".join(unresolved))
    check(not against, "no include runs against the layer order", "\n".join(against))
    check(not outside_abi, "only src/capi/ defines C ABI functions", "\n".join(outside_abi))

    return report(results)


if __name__ == "__main__":
    sys.exit(main())
