#!/usr/bin/python3
"""Checkpoints (issue 13), checked from outside by python3-torch:

  - kill and resume: trainings killed with SIGKILL at random moments (with
    checkpoints every step or every 3 steps, with and without a parallel map
    in the pipeline) and resumed until they finish end with a final state
    equal, bit for bit, to an uninterrupted run's (variables, optimizer
    slots, counters, random state, the input's position, callbacks' state);
    after every kill every checkpoint in the directory is readable;
  - SIGTERM or SIGINT mid-epoch with stop_on_signals: a graceful stop that
    saves where it stopped (no step lost) and resumes bit-identical; a second
    signal ends the process;
  - a checkpoint opens with torch.load (weights_only=True, PyTorch 2.6's
    default), and its tensors are tptrain's;
  - a state_dict saved by torch.save, and a TorchScript module, restore into
    a tptrain model (resume_child restore ...).

Drives tests/c/resume_child.c. Prints TAP.

usage: test_checkpoints.py PATH/TO/resume_child [KILLS]"""
import glob
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

import torch

CHILD = sys.argv[1]
KILLS = int(sys.argv[2]) if len(sys.argv) > 2 else 20
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def run(args, **kw):
    return subprocess.run([CHILD] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def train(logdir, final, flags):
    r = run(["train", logdir, final] + flags)
    if r.returncode != 0:
        raise AssertionError("resume_child failed: %s" % r.stderr)
    return r.stdout


def differences(a, b, path=""):
    """Where two loaded checkpoints differ. The queue's fill (a moving
    summary of how full the prefetch queue was) depends on thread timing,
    not on the training, and is skipped."""
    out = []
    if isinstance(a, dict):
        if set(a) != set(b):
            return [path + ": keys %s vs %s" % (sorted(a), sorted(b))]
        for k in a:
            out += differences(a[k], b[k], path + "/" + str(k))
    elif isinstance(a, list):
        if len(a) != len(b):
            return [path + ": lengths differ"]
        for i, (x, y) in enumerate(zip(a, b)):
            if isinstance(x, dict) and x.get("name") == "QueueInput/queue_size":
                continue
            out += differences(x, y, "%s[%d]" % (path, i))
    elif isinstance(a, torch.Tensor):
        if a.dtype != b.dtype or a.shape != b.shape or not torch.equal(a, b):
            out.append(path + ": tensors differ")
    elif a != b:
        out.append("%s: %r vs %r" % (path, a, b))
    return out


def readable(logdir):
    """Every checkpoint is whole; returns whether a write was cut short (its
    temporary file, which the index never names and the next start removes)."""
    files = glob.glob(os.path.join(logdir, "model-*"))
    whole = [f for f in files if ".tmp." not in f]
    if whole:
        r = run(["check"] + whole)
        if r.returncode != 0:
            raise AssertionError("unreadable checkpoint in %s: %s" % (logdir, r.stderr))
    if os.path.exists(os.path.join(logdir, "checkpoint")):
        with open(os.path.join(logdir, "checkpoint")) as f:
            latest = f.readline().split('"')[1]
        assert os.path.join(logdir, latest) in whole, "the index names a missing file " + latest
    return len(whole) != len(files)


# Steps that sleep 15 ms (kills land mid-epoch with the queue full), and
# steps that do not sleep with a checkpoint after each one (kills land in
# checkpoint writes); with and without a parallel map in the pipeline.
CONFIGS = [["--every", "3", "--sleep-us", "15000"], ["--every", "1", "--sleep-us", "0"],
           ["--every", "3", "--workers", "2", "--sleep-us", "15000"], ["--every", "1", "--workers", "2", "--sleep-us", "0"]]


@test
def kill_and_resume(tmp):
    rng = random.Random(1234)
    refs = {}
    for i, flags in enumerate(CONFIGS):
        train(os.path.join(tmp, "ref%d" % i), os.path.join(tmp, "ref%d.final" % i), flags)
        refs[i] = torch.load(os.path.join(tmp, "ref%d.final" % i))
    kills = resumes = cut_writes = 0
    for k in range(KILLS):
        i = k % len(CONFIGS)
        flags = CONFIGS[i]
        window = 0.6 if "15000" in flags else 0.15  # about the training's length after "started"
        logdir, final = os.path.join(tmp, "run%d" % k), os.path.join(tmp, "run%d.final" % k)
        for attempt in range(40):
            p = subprocess.Popen([CHILD, "train", logdir, final] + flags, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            out = ""
            line = p.stdout.readline()  # the run is past its start-up once it says "started"
            out += line
            if attempt < 2 and "started" in out:  # the first two attempts are killed, at a random moment
                time.sleep(rng.uniform(0, window))
                p.send_signal(signal.SIGKILL)
                p.communicate()
                if p.returncode == -signal.SIGKILL:
                    kills += 1
                    cut_writes += readable(logdir)
                    continue
            rest, err = p.communicate()
            out += rest
            if p.returncode == -signal.SIGKILL:
                continue
            if p.returncode != 0:
                raise AssertionError("run %d attempt %d failed: %s" % (k, attempt, err))
            resumes += "resumed_from=" in out
            break
        else:
            raise AssertionError("run %d never finished" % k)
        diff = differences(refs[i], torch.load(final))
        if diff:
            raise AssertionError("run %d (%s) differs from the uninterrupted run: %s" % (k, " ".join(flags), diff[:5]))
    print("# %d runs, %d kills (%d cut a checkpoint write short), %d finished by a resumed process; "
          "all equal to the uninterrupted runs" % (KILLS, kills, cut_writes, resumes))
    assert kills >= KILLS // 2 and resumes >= KILLS // 2, "too few kills to mean anything"


@test
def stop_and_resume_at_every_step(tmp):
    """A graceful stop after every global step in turn, then a resume: the
    same final state (covers the epoch boundaries exactly)."""
    flags = ["--every", "1"]
    train(os.path.join(tmp, "ref"), os.path.join(tmp, "ref.final"), flags)
    ref = torch.load(os.path.join(tmp, "ref.final"))
    for stop in [1, 9, 10, 11, 20, 39]:
        d, final = os.path.join(tmp, "s%d" % stop), os.path.join(tmp, "s%d.final" % stop)
        train(d, final, flags + ["--stop-at", str(stop)])
        assert not os.path.exists(final)
        out = train(d, final, flags)
        assert "resumed_from=%d" % stop in out, out
        diff = differences(ref, torch.load(final))
        assert not diff, "stopped at %d: %s" % (stop, diff[:5])


def latest_of(logdir):
    with open(os.path.join(logdir, "checkpoint")) as f:
        return f.readline().split('"')[1]


@test
def sigterm_mid_epoch_loses_no_step(tmp):
    """stop_on_signals (through TPTRAIN_STOP_ON_SIGNALS=1, as tools/tptrain-run
    sets it): SIGTERM or SIGINT mid-epoch stops at the next step boundary with
    exit 0, a ModelSaver that saves only at epoch ends saves there, and the
    resume ends bit-identical to an uninterrupted run."""
    rng = random.Random(99)
    env = dict(os.environ, TPTRAIN_STOP_ON_SIGNALS="1")
    configs = [["--every", "1000", "--sleep-us", "15000"],
               ["--every", "1000", "--sleep-us", "15000", "--workers", "2"]]
    refs = []
    for i, flags in enumerate(configs):
        train(os.path.join(tmp, "ref%d" % i), os.path.join(tmp, "ref%d.final" % i), flags)
        refs.append(torch.load(os.path.join(tmp, "ref%d.final" % i)))
    mid_epoch = 0
    for k in range(6):
        i, sig = k % 2, (signal.SIGTERM, signal.SIGINT)[k // 2 % 2]
        flags = configs[i]
        logdir, final = os.path.join(tmp, "run%d" % k), os.path.join(tmp, "run%d.final" % k)
        p = subprocess.Popen([CHILD, "train", logdir, final] + flags, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
        out = p.stdout.readline()
        if "started" not in out:
            p.kill()
            raise AssertionError("no start: %s %s" % (out, p.communicate()))
        time.sleep(rng.uniform(0.02, 0.45))
        p.send_signal(sig)
        rest, err = p.communicate(timeout=120)
        out += rest
        if p.returncode != 0:
            raise AssertionError("run %d: %s ended it with %d, not a graceful stop: %s" % (k, sig.name, p.returncode, err))
        if "done" not in out:  # finished before the signal came
            continue
        stopped_at = int(out.split("global_step=")[1].split()[0])
        if stopped_at == 40:
            continue  # the signal came after the last step
        if latest_of(logdir) != "model-%d" % stopped_at:
            raise AssertionError("run %d stopped at step %d, the latest checkpoint is %s: steps lost"
                                 % (k, stopped_at, latest_of(logdir)))
        with open(os.path.join(logdir, "log.log")) as f:
            log = f.read()
        if "saving at the stop by %s" % sig.name not in log or "Training was stopped by: %s" % sig.name not in log:
            raise AssertionError("the log does not say the stop and its save: " + log[-1500:])
        mid_epoch += stopped_at % 10 != 0
        out = train(logdir, final, flags)
        if "resumed_from=%d" % stopped_at not in out:
            raise AssertionError("run %d did not resume from step %d: %s" % (k, stopped_at, out))
        diff = differences(refs[i], torch.load(final))
        if diff:
            raise AssertionError("run %d (stopped by %s at %d) differs from the uninterrupted run: %s"
                                 % (k, sig.name, stopped_at, diff[:5]))
    if mid_epoch == 0:
        raise AssertionError("no signal landed mid-epoch (a test that checked nothing)")
    print("# %d of 6 stops were mid-epoch" % mid_epoch)


@test
def a_second_signal_ends_the_process(tmp):
    env = dict(os.environ, TPTRAIN_STOP_ON_SIGNALS="1")
    p = subprocess.Popen([CHILD, "train", os.path.join(tmp, "run"), os.path.join(tmp, "final"), "--sleep-us", "1000000",
                          "--say-steps", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    # The first signal lands in a step's 1 s sleep (which goes on through
    # EINTR), so the run is still there when the second comes.
    for line in p.stdout:
        if "sleeping after step" in line:
            break
    else:
        p.kill()
        raise AssertionError("no step: " + p.communicate()[1])
    p.send_signal(signal.SIGTERM)
    said = ""
    while "tptrain: SIGTERM" not in said:  # the first one was handled (a step sleeps 1 s, through EINTR)
        line = p.stderr.readline()
        if not line:
            break
        said += line
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=60)
    if p.returncode != -signal.SIGTERM:
        raise AssertionError("the second SIGTERM did not end the process: %d %s" % (p.returncode, said))


@test
def torch_load_reads_a_checkpoint(tmp):
    d = os.path.join(tmp, "t")
    train(d, os.path.join(tmp, "t.final"), ["--every", "5"])
    with open(os.path.join(d, "checkpoint")) as f:
        latest = f.readline().split('"')[1]
    # with weights_only=True, PyTorch 2.6's default: nothing in it needs a
    # global that mode refuses (no torch.jit._pickle type tags). 1.13's
    # weights-only unpickler has no BINFLOAT at all (any float refuses the
    # file): there, the default load.
    safe = {"weights_only": True} if int(torch.__version__.split(".")[0]) >= 2 else {}
    ck = torch.load(os.path.join(d, latest), **safe)
    assert ck["format"] == "tptrain.checkpoint" and ck["version"] == 1
    assert ck["global_step"] == 40 and ck["epoch_num"] == 4 and ck["next_epoch"] == 5
    v = ck["variables"]
    assert list(v) == ["fc0/W", "fc0/b", "fc1/W", "fc1/b"], list(v)
    assert v["fc0/W"].shape == (16, 8) and v["fc1/W"].shape == (4, 16)  # [out, in], as PyTorch's Linear
    assert ck["trainable"] == list(v)
    opt = ck["optimizer"]
    assert opt["kind"] == "adam" and abs(opt["hparams"]["learning_rate"] - 0.01) < 1e-12
    st = opt["state"]["fc0/W"]
    assert st["step"] == 40 and st["exp_avg"].shape == (16, 8) and st["exp_avg_sq"].min() >= 0
    assert ck["rng"]["cpu"].dtype == torch.uint8 and ck["input"].dtype == torch.uint8
    # the saved tensors are the trained model's: the final state equals them
    fin = torch.load(os.path.join(tmp, "t.final"))
    for name, t in v.items():
        assert torch.equal(t, fin["variables"][name]), name


@test
def restore_a_state_dict_and_torchscript(tmp):
    torch.manual_seed(0)

    class Fc(torch.nn.Module):
        def __init__(self, i, o):
            super().__init__()
            self.W = torch.nn.Parameter(torch.randn(o, i))
            self.b = torch.nn.Parameter(torch.randn(o))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc0, self.fc1 = Fc(8, 16), Fc(16, 4)

        def forward(self, x):
            return torch.relu(x @ self.fc0.W.t() + self.fc0.b) @ self.fc1.W.t() + self.fc1.b

    net = Net()
    sd = os.path.join(tmp, "net.pt")
    torch.save(net.state_dict(), sd)  # an OrderedDict with _metadata, as PyTorch saves it
    ts = os.path.join(tmp, "net.ts")
    torch.jit.script(net).save(ts)
    for path in (sd, ts):
        out = os.path.join(tmp, "restored.final")
        r = run(["restore", path, out])
        assert r.returncode == 0, r.stderr
        got = torch.load(out)["variables"]
        for name, p in net.state_dict().items():
            assert torch.equal(got[name.replace(".", "/")], p), name
    # a state_dict of another architecture: an error naming the variables
    torch.save({"fc0.W": torch.zeros(3, 3)}, sd)
    r = run(["restore", sd, os.path.join(tmp, "x")])
    assert r.returncode != 0 and "fc0/W" in r.stderr and "fc1/b" in r.stderr, r.stderr


def main():
    print("1..%d" % len(TESTS))
    failed = 0
    for n, fn in enumerate(TESTS, 1):
        tmp = tempfile.mkdtemp(prefix="tpt-ckpt-")
        t0 = time.time()
        try:
            fn(tmp)
            print("ok %d - %s (%.1f s)" % (n, fn.__name__, time.time() - t0))
        except Exception:
            failed += 1
            print("not ok %d - %s" % (n, fn.__name__))
            for line in traceback.format_exc().splitlines():
                print("# " + line)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
