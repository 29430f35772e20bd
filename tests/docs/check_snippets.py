#!/usr/bin/env python3
"""The code in the docs pages is code that builds and runs.

A page shows a snippet with a marker line, then a fenced block:

    <!-- snippet: examples/c/snippets/trainer_loop.c -->
    ```c
    ...
    ```

The block must equal the lines of that file between the lines "// [doc]" and
"// [/doc]" (the examples test builds and runs those
programs: C ones from examples/meson.build, Rust ones as binaries of
examples/rust, Go ones under examples/go/snippets). Each page listed below
must show its snippets in C, Rust and Go.

Every page of docs/ (listed or not) gets a test line of its own: a fenced
block labelled c, rust or go there must come right after a snippet marker,
so that no code in those languages escapes the check.

usage: check_snippets.py SOURCE_ROOT            prints TAP
       check_snippets.py SOURCE_ROOT --write    rewrites the blocks from the files
"""
import glob
import os
import re
import sys

PAGES = ["docs/trainer.md", "docs/models.md", "docs/dataflow.md", "docs/callbacks.md",
         "docs/custom_trainers.md", "docs/towers.md", "docs/distributed.md", "docs/checkpoints.md"]
MARK = re.compile(r"^<!-- snippet: (\S+) -->$")
LANG = {".c": "c", ".rs": "rust", ".go": "go"}
# A fence (CommonMark: up to 3 spaces, 3 or more backticks or tildes) and
# the first word of its info string.
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^\s`,{]*)")
# Info strings that name C, C++, Rust or Go: none of these may escape the check.
CHECKED = {"c", "h", "cpp", "c++", "cc", "cxx", "hpp", "rust", "rs", "go", "golang"}


def excerpt(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    starts = [i for i, l in enumerate(lines) if l.strip() == "// [doc]"]
    ends = [i for i, l in enumerate(lines) if l.strip() == "// [/doc]"]
    if len(starts) != 1 or len(ends) != 1 or ends[0] <= starts[0]:
        raise ValueError("%s: wants one // [doc] ... // [/doc] region" % path)
    return lines[starts[0] + 1:ends[0]]


def unmarked_blocks(page, text):
    """Problems for the fenced blocks labelled c, rust or go of `text` (the
    page's lines) that do not come right after a snippet marker."""
    problems, fence = [], None
    for i, line in enumerate(text):
        m = FENCE.match(line)
        if fence is None:
            if not m:
                continue
            fence = m.group(1)
            lang = m.group(2).lower()
            if lang in CHECKED and (i == 0 or not MARK.match(text[i - 1])):
                problems.append("%s:%d: a ```%s block without a snippet marker before it (show the [doc] "
                                "part of a program the examples test runs)" % (page, i + 1, lang))
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not m.group(2):
            fence = None  # the closing fence
    return problems


def check_page(root, page, write):
    """Returns (problems, languages seen, new text)."""
    text = open(os.path.join(root, page), encoding="utf-8").read().split("\n")
    problems, langs, out, i = [], set(), [], 0
    while i < len(text):
        line = text[i]
        out.append(line)
        m = MARK.match(line)
        i += 1
        if not m:
            continue
        rel = m.group(1)
        path = os.path.join(root, rel)
        lang = LANG.get(os.path.splitext(rel)[1])
        if not os.path.exists(path) or lang is None:
            problems.append("%s: snippet %s does not exist or has an unknown language" % (page, rel))
            continue
        langs.add(lang)
        want = excerpt(path)
        if i >= len(text) or text[i] != "```" + lang:
            problems.append("%s: the marker of %s is not followed by a ```%s block" % (page, rel, lang))
            continue
        j = i + 1
        while j < len(text) and text[j] != "```":
            j += 1
        got = text[i + 1:j]
        if got != want:
            first = next((k for k in range(max(len(got), len(want)))
                          if k >= len(got) or k >= len(want) or got[k] != want[k]), 0)
            problems.append("%s: the block of %s differs from the file at its line %d:\n  page: %r\n  file: %r"
                            % (page, rel, first + 1, got[first] if first < len(got) else None,
                               want[first] if first < len(want) else None))
        out.append("```" + lang)
        out.extend(want if write else got)
        out.append("```")
        i = j + 1
    missing = {"c", "rust", "go"} - langs
    if missing:
        problems.append("%s: no snippet in %s" % (page, ", ".join(sorted(missing))))
    return problems, "\n".join(out)


def main():
    root = sys.argv[1]
    write = "--write" in sys.argv[2:]
    others = sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    others = [p for p in others if p not in PAGES]
    print("TAP version 13")
    print("1..%d" % (len(PAGES) + len(others)))
    bad = 0
    for n, page in enumerate(PAGES + others, 1):
        new = None
        try:
            text = open(os.path.join(root, page), encoding="utf-8").read().split("\n")
            problems = unmarked_blocks(page, text)
            if page in PAGES:
                more, new = check_page(root, page, write)
                problems += more
        except (OSError, ValueError) as e:
            problems = [str(e)]
        if write and new is not None:
            with open(os.path.join(root, page), "w", encoding="utf-8") as f:
                f.write(new)
            problems = [p for p in problems if "differs" not in p]
        if problems:
            bad += 1
            print("not ok %d - %s" % (n, page))
            for p in problems:
                for l in p.split("\n"):
                    print("#   " + l)
        elif page in PAGES:
            print("ok %d - %s: every snippet is its program's [doc] part" % (n, page))
        else:
            print("ok %d - %s: no c, rust or go block outside a snippet" % (n, page))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
