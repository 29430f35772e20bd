#!/usr/bin/env python3
"""What a training run leaves on disk and prints: stats.json (parsed by a
strict JSON parser), its resume rules, atomicity under SIGKILL, the log
directory actions, log.log, progress output, the estimated time left and the
slow-callback report. Drives tests/c/train_child.c. Prints TAP.

usage: test_trainer_files.py PATH/TO/train_child"""
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

CHILD = sys.argv[1]
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def strict_load(path):
    """json.load that refuses NaN/Infinity (not JSON) and duplicate keys."""
    def no_constants(name):
        raise ValueError("non-JSON constant " + name)

    def no_dupes(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise ValueError("duplicate keys " + repr(keys))
        return dict(pairs)

    with open(path) as f:
        return json.load(f, parse_constant=no_constants, object_pairs_hook=no_dupes)


def run(logdir, start, max_epoch, steps, action, *flags, check=True):
    p = subprocess.run([CHILD, logdir, str(start), str(max_epoch), str(steps), action, *flags],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if check and p.returncode != 0:
        raise AssertionError("child failed (%d): %s %s" % (p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
    return p


def expect_eq(a, b, what=""):
    if a != b:
        raise AssertionError("%s: %r != %r" % (what, a, b))


@test
def stats_json_entries_per_step_and_epoch(d):
    run(d, 1, 3, 4, "refuse", "--quiet")
    stats = strict_load(os.path.join(d, "stats.json"))
    # steps 0..2 of each epoch: their own entry; step 3's loss joins the epoch entry with acc
    expect_eq(len(stats), 3 * 4, "entries")
    g = 0
    for epoch in (1, 2, 3):
        for k in range(4):
            g += 1
            e = stats[(epoch - 1) * 4 + k]
            expect_eq(e["epoch_num"], epoch, "epoch_num")
            expect_eq(e["global_step"], g, "global_step")
            expect_eq(e["loss"], 1.0 / g, "loss")
            if k == 3:
                expect_eq(e["acc"], 0.5 + 0.01 * epoch, "acc")
            else:
                assert "acc" not in e


@test
def scalar_put_in_before_train_gets_its_own_entry(d):
    # tensorpack/callbacks/monitor.py at 1547a54e: JSONWriter._before_train
    # ends with self._trigger() (line 373), which appends the scalars put so
    # far as one entry with epoch_num = starting_epoch - 1 (trainer's loop
    # before training) and the global_step as it stands (lines 393-394).
    run(d, 3, 3, 2, "refuse", "--quiet", "--before-train")
    stats = strict_load(os.path.join(d, "stats.json"))
    expect_eq(stats[0], {"init": 0.25, "epoch_num": 2, "global_step": 7}, "before_train entry")
    expect_eq([e["global_step"] for e in stats[1:]], [8, 9], "the steps' entries after it")
    assert all("init" not in e for e in stats[1:]), stats


@test
def stats_json_appends_on_resume_and_backs_up_otherwise(d):
    run(d, 1, 2, 3, "refuse", "--quiet")
    first = strict_load(os.path.join(d, "stats.json"))
    run(d, 3, 4, 3, "keep", "--quiet")  # continues epoch 2: appended
    both = strict_load(os.path.join(d, "stats.json"))
    expect_eq(both[:len(first)], first, "old entries kept")
    expect_eq([e["epoch_num"] for e in both[len(first):]], [3, 3, 3, 4, 4, 4], "new epochs")
    run(d, 1, 1, 2, "keep", "--quiet")  # starts over: the old file is moved aside
    backups = glob.glob(os.path.join(d, "stats.json.*"))
    backups = [b for b in backups if ".tmp." not in b]
    expect_eq(len(backups), 1, "backups")
    expect_eq(strict_load(backups[0]), both, "backup content")
    expect_eq([e["epoch_num"] for e in strict_load(os.path.join(d, "stats.json"))], [1, 1], "fresh file")
    # the old log.log was kept aside as well
    assert glob.glob(os.path.join(d, "log.log.*")), os.listdir(d)


@test
def stats_json_is_not_rewritten_every_step(d):
    # Mid-epoch entries reach the file at most every 5 s (the first at once),
    # so a long run is not quadratic; the epoch's end writes them all.
    p = run(d, 1, 1, 3000, "refuse", "--quiet", "--peek", "2999")
    peek = int(p.stdout.split("peek_entries=")[1].split()[0])
    # Rewritten every step, the file would have 2997 entries here; throttled,
    # 1 on a normal machine (a few if 3000 steps took many 5 s intervals).
    assert 1 <= peek < 100, peek
    stats = strict_load(os.path.join(d, "stats.json"))
    expect_eq([e["global_step"] for e in stats], list(range(1, 3001)), "every step's entry")


@test
def stats_json_every_step_in_short_epochs(d):
    # An entry every step in 50-step epochs: each epoch's entries span a page,
    # so each write rewrites the file, and past 1 MiB those rewrites wait
    # (<= 5 % of the time). Every entry still reaches the file, once, in order.
    run(d, 1, 400, 50, "refuse", "--quiet")
    path = os.path.join(d, "stats.json")
    assert os.path.getsize(path) > (1 << 20), os.path.getsize(path)
    stats = strict_load(path)
    expect_eq([e["global_step"] for e in stats], list(range(1, 20001)), "every step's entry")
    expect_eq([e["epoch_num"] for e in stats if "acc" in e], list(range(1, 401)), "every epoch's acc")


@test
def non_finite_values_are_null(d):
    run(d, 1, 1, 4, "refuse", "--quiet", "--nan")
    stats = strict_load(os.path.join(d, "stats.json"))
    assert all(e["weird"] is None for e in stats), stats


@test
def stats_json_survives_sigkill(d):
    rng = random.Random(1234)
    kills = 0
    parsed = 0
    for trial in range(15):
        sub = os.path.join(d, "run%d" % trial)
        p = subprocess.Popen([CHILD, sub, "1", "1000", "50", "refuse", "--quiet", "--sleep-us", "200"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        path = os.path.join(sub, "stats.json")
        deadline = time.time() + 20
        while not os.path.exists(path) and time.time() < deadline and p.poll() is None:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.5))  # then kill it at a random moment of its writing
        p.send_signal(signal.SIGKILL)
        p.wait()
        kills += p.returncode == -signal.SIGKILL
        if os.path.exists(path):
            stats = strict_load(path)  # never truncated or unparsable
            assert isinstance(stats, list) and stats, path
            steps = [e["global_step"] for e in stats]
            assert steps == sorted(steps), steps
            parsed += 1
    assert kills >= 10, "only %d children were killed mid-run" % kills
    assert parsed >= 10, "only %d runs had written stats.json before the kill" % parsed


@test
def logdir_refuse_keep_delete_backup_new(d):
    base = os.path.join(d, "train_log")
    run(base, 1, 1, 2, "refuse", "--quiet")
    p = run(base, 1, 1, 2, "refuse", "--quiet", check=False)
    expect_eq(p.returncode, 3, "refuse exit code")
    assert "exists and is not empty" in p.stderr and "KEEP" in p.stderr, p.stderr
    p = run(base, 1, 1, 2, "ask", "--quiet", check=False)  # no terminal: refuse
    expect_eq(p.returncode, 3, "ask without a terminal")
    open(os.path.join(base, "marker"), "w").close()
    run(base, 1, 1, 2, "keep", "--quiet")
    assert os.path.exists(os.path.join(base, "marker"))
    run(base, 1, 1, 2, "delete", "--quiet")
    assert not os.path.exists(os.path.join(base, "marker"))
    assert os.path.exists(os.path.join(base, "stats.json"))
    open(os.path.join(base, "marker"), "w").close()
    run(base, 1, 1, 2, "backup", "--quiet")
    backups = [p for p in glob.glob(base + "*") if p != base]
    expect_eq(len(backups), 1, "backup dirs")
    assert os.path.exists(os.path.join(backups[0], "marker"))
    assert not os.path.exists(os.path.join(base, "marker"))
    p = run(base, 1, 1, 2, "new", "--quiet")
    used = p.stdout.strip().splitlines()[-1].split("=", 1)[1]
    assert used != base and used.startswith(base), used
    assert os.path.exists(os.path.join(used, "stats.json"))
    assert not os.path.exists(os.path.join(base, "marker"))


@test
def log_file_mirrors_console(d):
    p = run(d, 1, 2, 3, "refuse", "--progress", "lines")
    console = [l for l in p.stdout.splitlines() if l.startswith("[")]
    with open(os.path.join(d, "log.log")) as f:
        logged = f.read().splitlines()
    expect_eq(logged, console, "log.log vs console")
    text = "\n".join(logged)
    for needle in ("Start Epoch 1", "Epoch 2 (global_step 6) finished", "Training has finished!", "loss: ", "acc: 0.52"):
        assert needle in text, needle


@test
def progress_lines_when_not_a_terminal(d):
    p = run(d, 1, 3, 5, "refuse")  # AUTO with pipes: plain lines
    lines = [l for l in p.stdout.splitlines() if "5/5 [" in l]
    expect_eq(len(lines), 3, "one progress line per epoch")
    assert "Epoch 1: 100%" in lines[0] and "it/s" in lines[0], lines[0]
    assert "\r" not in p.stderr and "\r" not in p.stdout


@test
def progress_bar_goes_to_stderr_only(d):
    p = subprocess.run([CHILD, d, "1", "2", "5", "refuse", "--progress", "bar"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)  # bytes: keep the \r
    assert b"\r" in p.stderr and b"|" in p.stderr and b"5/5" in p.stderr, repr(p.stderr[:300])
    with open(os.path.join(d, "log.log")) as f:
        assert "\r" not in f.read() and b"5/5 [" not in p.stdout


@test
def estimated_time_left_each_epoch_but_the_last(d):
    p = run(d, 1, 3, 2, "refuse")
    expect_eq(p.stdout.count("Estimated Time Left: "), 2, "ETA lines")


@test
def slow_trigger_epoch_is_reported(d):
    p = run(d, 1, 1, 1, "refuse", "--slow-trigger")
    line = [l for l in p.stdout.splitlines() if "Callbacks took" in l]
    expect_eq(len(line), 1, "report lines")
    assert "slow: 2." in line[0] and "epoch_scalars" not in line[0], line[0]


def main():
    print("TAP version 13")
    print("1..%d" % len(TESTS))
    failed = 0
    for i, fn in enumerate(TESTS, 1):
        d = tempfile.mkdtemp(prefix="tpt_files_")
        try:
            fn(d)
            print("ok %d - %s" % (i, fn.__name__))
        except Exception:
            failed += 1
            print("not ok %d - %s" % (i, fn.__name__))
            for line in traceback.format_exc().splitlines():
                print("# " + line)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
