"""TAP output for the layout tests: a list of checks, each (ok, what, detail)."""


def report(results):
    """Prints the checks as TAP (a failed check's detail as comments) and
    returns the exit status: 0 when every check passed."""
    print("1..%d" % len(results))
    failed = 0
    for i, (ok, what, detail) in enumerate(results, 1):
        print("%s %d - %s" % ("ok" if ok else "not ok", i, what))
        if not ok:
            failed += 1
            for line in detail.splitlines():
                print("# " + line)
    return 1 if failed else 0
