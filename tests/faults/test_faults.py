#!/usr/bin/env python3
"""Storage faults, stale temporaries, a shared log directory (issue 31).

Each case runs tests/faults/faults_child (a training with ModelSaver,
MaxSaver, TensorBoard, stats.json and log.log) with one file kind of its log
directory failing: a full disk from the first or a later write, one EIO on a
write, an fsync or a rename. The run must finish (training goes on), name the
failure once, and leave an index that names a readable checkpoint, a
stats.json that a strict JSON parser reads, event files of whole, checksummed
records and no temporaries. Then space returns and the same directory
auto-resumes to the end. Also: temporaries of killed runs are removed at the
next start; a second run on a busy directory is refused, naming the holder,
and the directory is free again once that holder is killed; a FIFO where
stats.json or the index should be neither hangs nor crashes.

usage: test_faults.py PATH/TO/faults_child. Prints TAP."""
import concurrent.futures
import glob
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback

CHILD = sys.argv[1]
TESTS = []
TIMEOUT = 300  # seconds per child; under ASan a run takes a few


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


def run(logdir, *flags, fault=None, check=True, killed=False):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("TPT_FAULT_"):
            del env[k]
    if fault:
        env["TPT_FAULT_DIR"] = logdir
        env.update({"TPT_FAULT_" + k.upper(): str(v) for k, v in fault.items()})
    p = subprocess.run([CHILD, logdir, *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=TIMEOUT, env=env)
    if killed:
        if p.returncode != -signal.SIGKILL:
            raise AssertionError("the kill never came (exit %d; a case that cannot fail): %s" % (
                p.returncode, p.stdout[-2000:]))
        return p
    if p.returncode < 0:
        raise AssertionError("child killed by signal %d: %s" % (-p.returncode, p.stderr[-3000:]))
    if check and p.returncode != 0:
        raise AssertionError("child failed (%d): %s %s" % (p.returncode, p.stdout[-2000:], p.stderr[-3000:]))
    return p


# ---- what a directory must hold after any run

_CRC_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def masked_crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    c ^= 0xFFFFFFFF
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def check_event_file(path, cut_tail=False):
    """Whole TFRecords with valid checksums, to the last byte (with cut_tail,
    a killed writer's: to a last record that may be cut off, which
    TensorBoard's reader takes for the end); returns their number."""
    with open(path, "rb") as f:
        data = f.read()
    at = n = 0
    while at < len(data):
        if at + 12 > len(data):
            if cut_tail:
                break
            raise AssertionError("%s: a cut record header at byte %d" % (path, at))
        length, lcrc = struct.unpack_from("<QI", data, at)
        if masked_crc32c(data[at:at + 8]) != lcrc:
            raise AssertionError("%s: bad length checksum at byte %d" % (path, at))
        body = data[at + 12:at + 12 + length]
        if len(body) != length or at + 16 + length > len(data):
            if cut_tail:
                break
            raise AssertionError("%s: a cut record at byte %d" % (path, at))
        (dcrc,) = struct.unpack_from("<I", data, at + 12 + length)
        if masked_crc32c(body) != dcrc:
            raise AssertionError("%s: bad data checksum at byte %d" % (path, at))
        at += 16 + length
        n += 1
    return n


def read_index(d):
    path = os.path.join(d, "checkpoint")
    if not os.path.exists(path):
        return None, []
    latest, all_ = None, []
    with open(path) as f:
        for line in f:
            m = re.match(r'(model_checkpoint_path|all_model_checkpoint_paths): "(.*)"$', line.strip())
            if not m:
                raise AssertionError("index line %r" % line)
            if m.group(1) == "model_checkpoint_path":
                latest = m.group(2)
            else:
                all_.append(m.group(2))
    if latest is None or latest not in all_:
        raise AssertionError("index names no latest among its list: %r %r" % (latest, all_))
    return latest, all_


def readable_checkpoints(paths):
    """Each path a checkpoint that tpt_trainer_resume reads (one child for all)."""
    if not paths:
        return
    p = subprocess.run([CHILD, "check", *paths], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=TIMEOUT)
    if p.returncode != 0:
        raise AssertionError("not a readable checkpoint: %s" % p.stderr[-2000:])


def check_directory(d, killed=False, cut=()):
    """The promises that hold after every run, faults or not. A killed run
    (`killed`) may leave temporaries (the next run removes them), and the
    files it appended to (`cut`: event files, log.log) may end in a cut
    record."""
    temps = [f for f in os.listdir(d) if re.search(r"\.tmp\.\d+(\.\d+)?$", f)]
    if temps and not killed:
        raise AssertionError("temporaries left: %r" % temps)
    latest, all_ = read_index(d)
    checkpoints = [c for c in glob.glob(os.path.join(d, "max-*")) if ".tmp." not in c]
    if latest is not None:
        for name in all_:
            if not os.path.isfile(os.path.join(d, name)):
                raise AssertionError("the index names %s, which does not exist" % name)
        checkpoints.insert(0, os.path.join(d, latest))
    readable_checkpoints(checkpoints)
    stats = os.path.join(d, "stats.json")
    if os.path.exists(stats):
        entries = strict_load(stats)
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise AssertionError("stats.json is not a list of objects")
    for ev in glob.glob(os.path.join(d, "events.out.tfevents.*")):
        check_event_file(ev, cut_tail=ev in cut)
    for log in glob.glob(os.path.join(d, "log.log*")):
        with open(log) as f:
            lines = f.read().split("\n")
        if lines[-1] and log not in cut:  # a last line without its newline
            raise AssertionError("%s ends in a cut line: %r" % (log, lines[-1]))
        for line in lines[:-1]:
            if not re.match(r"\[\d{4} \d\d:\d\d:\d\d @tptrain\] ", line):
                raise AssertionError("%s: a cut or glued log line: %r" % (log, line))
    return latest


def error_lines(d, component):
    path = os.path.join(d, "log.log")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [l for l in f if " ERR " in l and component in l]


# ---- the fault matrix

# file prefix -> the component whose error line names the failure
TARGETS = {
    "model-": "ModelSaver",
    "checkpoint": "ModelSaver",
    "stats.json": "JSONWriter",
    "events.out": "TFEventWriter",
    "max-": "MaxSaver",
    "log.log": None,  # its failures go to stderr
}
# the files written through a temporary, fsync'ed and renamed
ATOMIC = ("model-", "checkpoint", "stats.json", "max-")

MODES = [
    ("full disk from the first write", dict(op="write", at=1, full=1, errno="ENOSPC")),
    ("full disk from the second write", dict(op="write", at=2, full=1, errno="ENOSPC")),
    ("one EIO on the second write", dict(op="write", at=2, errno="EIO")),
    ("one EIO on the first write", dict(op="write", at=1, errno="EIO")),
    ("one EIO on an fsync", dict(op="sync", at=1, errno="EIO")),
    ("one failed rename", dict(op="rename", at=1, errno="EIO")),
]


def fault_case(prefix, label, fault):
    def case(d):
        p = run(d, "--epochs", "2", fault=dict(fault, file=prefix))
        if "run=TPT_OK global_step=12" not in p.stdout:
            raise AssertionError("the run did not train to its end: " + p.stdout)
        m = re.search(r"faults=(\d+)", p.stdout)
        if not m or int(m.group(1)) == 0:
            raise AssertionError("the fault never fired (a case that cannot fail): " + p.stdout)
        component = TARGETS[prefix]
        if component:
            errs = error_lines(d, component)
            if len(errs) != 1:
                raise AssertionError("%d error lines of %s, want 1: %r" % (len(errs), component, errs))
        else:
            said = [l for l in p.stderr.splitlines() if "cannot write" in l and "log.log" in l]
            if len(said) != 1:
                raise AssertionError("log.log's failure said %d times on stderr: %r" % (len(said), p.stderr))
            with open(os.path.join(d, "log.log")) as f:
                for line in f:
                    if not re.match(r"\[\d{4} \d\d:\d\d:\d\d @tptrain\] ", line):
                        raise AssertionError("a cut or glued log line: %r" % line)
        if "Training failed" in open(os.path.join(d, "log.log")).read() if os.path.exists(
                os.path.join(d, "log.log")) else False:
            raise AssertionError("log.log says training failed")
        check_directory(d)
        # Space returns: the same directory goes on to the end.
        latest, _ = read_index(d)
        p = run(d, "--epochs", "4")
        if "run=TPT_OK global_step=24" not in p.stdout:
            raise AssertionError("the resumed run did not end at step 24: " + p.stdout)
        if latest is not None and "resumed_from=%s" % latest.split("-")[1] not in p.stdout:
            raise AssertionError("did not resume from %s: %s" % (latest, p.stdout))
        with open(os.path.join(d, "log.log")) as f:
            said = "Auto-resume: continuing from %s/%s." % (d, latest) in f.read()
        if latest is not None and not said:
            raise AssertionError("log.log does not say the run resumed from " + latest)
        if check_directory(d) != "model-24":
            raise AssertionError("the index does not name model-24 after the resumed run")
        if not os.path.exists(os.path.join(d, "max-score")):
            raise AssertionError("no max-score after the resumed run")
        steps = [e["global_step"] for e in strict_load(os.path.join(d, "stats.json"))]
        if steps != sorted(steps) or steps[-1] != 24:
            raise AssertionError("stats.json's steps after the resume: %r" % steps)

    case.__name__ = "%s: %s" % (prefix, label)
    return case


for _prefix in TARGETS:
    for _label, _fault in MODES:
        if _fault["op"] in ("sync", "rename") and _prefix not in ATOMIC:
            continue
        TESTS.append(fault_case(_prefix, _label, _fault))


# ---- a kill in the middle of a write
#
# The process is SIGKILLed at its k-th write to one file kind, that write cut
# where Linux cuts it (faults_child's TPT_FAULT_OP=kill). With 150 scalars a
# step, stats.json's and the event files' writes span pages. What it leaves
# must hold what check_directory asks (temporaries and a cut last record of
# an appended file aside), and the same directory auto-resumes to the end.

KILL_POINTS = (1, 2, 3)


def kill_case(prefix, at):
    def case(d):
        run(d, "--epochs", "3", "--wide", "150", fault=dict(file=prefix, op="kill", at=at), killed=True)
        cut = glob.glob(os.path.join(d, "events.out.tfevents.*")) + [os.path.join(d, "log.log")]
        latest = check_directory(d, killed=True, cut=cut)
        p = run(d, "--epochs", "4", "--wide", "150")
        if "run=TPT_OK global_step=24" not in p.stdout:
            raise AssertionError("the resumed run did not end at step 24: " + p.stdout)
        if latest is not None and "resumed_from=%s" % latest.split("-")[1] not in p.stdout:
            raise AssertionError("did not resume from %s: %s" % (latest, p.stdout))
        # the killed run's log.log was moved aside: log.log.<time>
        cut = cut[:-1] + glob.glob(os.path.join(d, "log.log.*"))
        if check_directory(d, cut=cut) != "model-24":
            raise AssertionError("the index does not name model-24 after the resumed run")
        stats = strict_load(os.path.join(d, "stats.json"))
        steps = [e["global_step"] for e in stats]
        if any(a >= b for a, b in zip(steps, steps[1:])) or steps[-1] != 24:
            raise AssertionError("stats.json's steps after the resume: %r" % steps)
        if not all("w149" in e for e in stats if "score" not in e):
            raise AssertionError("a step's entry lost its scalars")

    case.__name__ = "%s: killed in its write %d" % (prefix, at)
    return case


for _prefix in TARGETS:
    for _at in KILL_POINTS:
        TESTS.append(kill_case(_prefix, _at))


@test
def disk_full_before_the_run(d):
    """Every file of the directory fails from the first write: the run still
    trains to its end."""
    p = run(d, "--epochs", "2", fault=dict(file="", op="write", at=1, full=1))
    if "run=TPT_OK global_step=12" not in p.stdout:
        raise AssertionError(p.stdout)
    check_directory(d)
    p = run(d, "--epochs", "3")
    if "run=TPT_OK global_step=18" not in p.stdout:
        raise AssertionError(p.stdout)
    check_directory(d)


@test
def temporaries_of_killed_runs_are_removed(d):
    os.makedirs(d, exist_ok=True)
    stale = ["checkpoint.tmp.999999", "stats.json.tmp.12.3", "model-4.tmp.77.0", "log.log.tmp.5.5",
             "max-score.tmp.123456.9"]
    keep = ["notes.tmp.txt", "tmp.5"]
    for name in stale + keep:
        open(os.path.join(d, name), "w").close()
    run(d, "--epochs", "1")
    left = sorted(os.listdir(d))
    for name in stale:
        if name in left:
            raise AssertionError("%s was not removed: %r" % (name, left))
    for name in keep:
        if name not in left:
            raise AssertionError("%s is not the library's and was removed" % name)
    with open(os.path.join(d, "log.log")) as f:
        if "Removed 5 temporary file(s)" not in f.read():
            raise AssertionError("the log does not say what was removed")


@test
def a_second_run_on_a_busy_directory_is_refused(d):
    first = subprocess.Popen([CHILD, d, "--epochs", "50", "--sleep-us", "100000"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        line = first.stdout.readline()
        deadline = time.time() + TIMEOUT
        while "started" not in line and time.time() < deadline:
            if first.poll() is not None:
                raise AssertionError("the first run ended: " + first.stderr.read())
            line = first.stdout.readline()
        t0 = time.time()
        second = run(d, "--epochs", "1", check=False)
        took = time.time() - t0
        if second.returncode == 0:
            raise AssertionError("the second run trained on a busy directory: " + second.stdout)
        want = "is in use by another run (process %d on " % first.pid
        if want not in second.stderr or d not in second.stderr:
            raise AssertionError("the refusal does not name the directory and the holder: " + second.stderr)
        if "TPT_ERR_STATE" not in second.stdout:
            raise AssertionError("not TPT_ERR_STATE: " + second.stdout)
        if took > 60:
            raise AssertionError("the refusal took %.0f s" % took)
    finally:
        first.kill()  # SIGKILL: the OS releases the lock
        first.wait()
    p = run(d, "--epochs", "1")
    if "run=TPT_OK" not in p.stdout:
        raise AssertionError("the directory is not free after its holder was killed: " + p.stdout)
    check_directory(d)


@test
def a_filesystem_without_locks_runs_unlocked_and_says_so(d):
    p = run(d, "--epochs", "1", fault=dict(file=".tptrain.lock", op="lock", at=1, errno="ENOLCK"))
    if "run=TPT_OK" not in p.stdout or "faults=1" not in p.stdout:
        raise AssertionError(p.stdout)
    with open(os.path.join(d, "log.log")) as f:
        log = f.read()
    if "WRN cannot lock the log directory" not in log or "No locks available" not in log:
        raise AssertionError("no warning about the lock: " + log[-2000:])
    check_directory(d)


@test
def a_fifo_for_stats_json_is_moved_aside(d):
    os.makedirs(d, exist_ok=True)
    os.mkfifo(os.path.join(d, "stats.json"))
    p = run(d, "--epochs", "1")
    if "run=TPT_OK" not in p.stdout:
        raise AssertionError(p.stdout)
    check_directory(d)
    if not strict_load(os.path.join(d, "stats.json")):
        raise AssertionError("stats.json is empty")


@test
def a_fifo_for_the_index_is_refused(d):
    os.makedirs(d, exist_ok=True)
    os.mkfifo(os.path.join(d, "checkpoint"))
    p = run(d, "--epochs", "1", check=False)
    if p.returncode == 0 or "FIFO" not in p.stderr or "checkpoint" not in p.stderr:
        raise AssertionError("a FIFO index: %d %s %s" % (p.returncode, p.stdout, p.stderr))


def one(i, fn):
    d = tempfile.mkdtemp(prefix="tpt-faults-")
    try:
        fn(os.path.join(d, "logs"))
        return i, fn.__name__, None
    except Exception:
        return i, fn.__name__, traceback.format_exc()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    print("1..%d" % len(TESTS), flush=True)
    failed = 0
    # Two at a time: each child is mostly process start-up and small writes.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = sorted(pool.map(lambda a: one(*a), enumerate(TESTS, 1)))
    for i, name, error in results:
        if error is None:
            print("ok %d - %s" % (i, name))
        else:
            failed += 1
            print("not ok %d - %s" % (i, name))
            for line in error.splitlines():
                print("# " + line)
    sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
