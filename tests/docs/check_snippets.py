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

usage: check_snippets.py SOURCE_ROOT            prints TAP
       check_snippets.py SOURCE_ROOT --write    rewrites the blocks from the files
"""
import os
import re
import sys

PAGES = ["docs/trainer.md", "docs/models.md", "docs/dataflow.md"]
MARK = re.compile(r"^<!-- snippet: (\S+) -->$")
LANG = {".c": "c", ".rs": "rust", ".go": "go"}


def excerpt(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    starts = [i for i, l in enumerate(lines) if l.strip() == "// [doc]"]
    ends = [i for i, l in enumerate(lines) if l.strip() == "// [/doc]"]
    if len(starts) != 1 or len(ends) != 1 or ends[0] <= starts[0]:
        raise ValueError("%s: wants one // [doc] ... // [/doc] region" % path)
    return lines[starts[0] + 1:ends[0]]


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
    print("TAP version 13")
    print("1..%d" % len(PAGES))
    bad = 0
    for n, page in enumerate(PAGES, 1):
        try:
            problems, new = check_page(root, page, write)
        except (OSError, ValueError) as e:
            problems, new = [str(e)], None
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
        else:
            print("ok %d - %s: every snippet is its program's [doc] part" % (n, page))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
