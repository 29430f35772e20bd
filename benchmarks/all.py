#!/usr/bin/python3
"""benchmarks/run all: every benchmark, side by side with its baseline, into
one table (docs/benchmarks.md).

Each benchmark is measured in ROUNDS rounds (default 5). A round measures
tptrain and its baseline once each, in this invocation, alternating which
side goes first (the baseline first in odd rounds); the pairs that one
program measures itself (loop overhead, call round trip, the hand-written
LibTorch loop, towers and distributed scaling) alternate inside that program.
A row's ratio is computed per round and the table gives its median, min and
max, with each side's median figure:

    ratio = tptrain / baseline   where more is better (steps/s, images/s)
    ratio = baseline / tptrain   where less is better (ns, ms, s, MB)

so that a ratio above 1 always means tptrain is ahead.

usage: benchmarks/run all [--rounds N] [--only NAME,NAME] [--out FILE] [--quick]
                         [--build DIR] [--no-build] [--device DEV] [--python PY] [--data DIR]
  --quick     shorter measurements (a smoke test of the harness, not figures)
  --build     the build directory (default build/); --no-build: use it as it is
  --device    where fashion-mnist and resnet18 train (default cpu; "cuda:0" on
              a GPU machine: tptrain's towers there, PyTorch's network and data
              there; scripts/gpu-check runs this)
  --python    the interpreter of the PyTorch baselines (default /usr/bin/python3)
  --data      the Fashion-MNIST IDX files (default /usr/share/datasets/fashion-mnist)
Needs a quiet machine: anything else running (a build) slows LibTorch 2-6x.
Standard library only; run by /usr/bin/python3, which also has python3-torch
for the baselines."""
import argparse
import datetime
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")
PY = "/usr/bin/python3"
DATA = "/usr/share/datasets/fashion-mnist"
DEVICE = "cpu"


def on_device(key):
    """A row's key, with the device's type after it when that is not the CPU."""
    return key if DEVICE == "cpu" else "%s-%s" % (key, DEVICE.split(":")[0])


class Row:
    def __init__(self, key, what, unit, better, baseline, goal=""):
        self.key, self.what, self.unit, self.better = key, what, unit, better
        self.baseline, self.goal = baseline, goal
        self.base, self.tpt = [], []  # one value per round (None: not measured)
        self.error = None
        self.skipped = None  # why the row was not measured on this machine

    def add(self, base, tpt):
        self.base.append(base)
        self.tpt.append(tpt)

    def ratios(self):
        out = []
        for b, t in zip(self.base, self.tpt):
            if b is None or t is None or b <= 0 or t <= 0:
                continue
            out.append(t / b if self.better == "higher" else b / t)
        return out


def run(cmd, env=None, cwd=None, timeout=900):
    """Runs cmd in a process group of its own; returns its stdout (stderr goes
    along on failure). On a timeout the whole group is killed, so that no
    launcher's children go on slowing the benchmarks after it."""
    e = dict(os.environ)
    e.update(env or {})
    e["BUILD_DIR"] = BUILD  # for the shell scripts
    p = subprocess.Popen(cmd, cwd=cwd or ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except BaseException:
        kill_group(p)
        raise
    if p.returncode != 0:
        raise RuntimeError("%s exited %d:\n%s%s" % (" ".join(cmd), p.returncode, out[-2000:], err[-2000:]))
    return out


def kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass
    p.wait()


def grab(pattern, text, what):
    m = re.search(pattern, text, re.M)
    if not m:
        raise RuntimeError("no %s in:\n%s" % (what, text[-2000:]))
    return float(m.group(1))


def build_env():
    return {"TPTRAIN_LIB_DIR": BUILD, "LD_LIBRARY_PATH": BUILD,
            "CARGO_TARGET_DIR": os.path.join(BUILD, "cargo-target"),
            "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local",
            "GOCACHE": os.environ.get("GOCACHE", os.path.join(BUILD, "go-cache")),
            "PKG_CONFIG_PATH": os.path.join(BUILD, "meson-uninstalled"), "CGO_ENABLED": "1"}


# --------------------------------------------------------------- benchmarks
# Each takes (rounds, quick, tmp) and returns its rows.

def loop_overhead(rounds, quick, tmp):
    progs = [("C", os.path.join(BUILD, "benchmarks/bench_loop_overhead"), "c", None)]
    builds = []
    if shutil.which("cargo"):
        builds.append(("Rust", os.path.join(BUILD, "cargo-target/release/loop_overhead"), "rust",
                       (["cargo", "build", "--offline", "--release", "-q", "--bin", "loop_overhead"], "examples/rust")))
    if shutil.which("go"):
        exe = os.path.join(BUILD, "go_loop_overhead")
        builds.append(("Go", exe, "go", (["go", "build", "-o", exe, "./loop_overhead"], "examples/go")))
    for lang, exe, tag, (cmd, cwd) in builds:
        try:
            run(cmd, env=build_env(), cwd=os.path.join(ROOT, cwd))
            progs.append((lang, exe, tag, None))
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:  # that language's row says so
            progs.append((lang, exe, tag, "building the %s program failed: %s" % (lang, e)))
    rows = []
    for lang, exe, tag, error in progs:
        rows.append(Row("loop-overhead-" + tag,
                        "trainer loop overhead from %s: default callbacks, one hooked step around an empty "
                        "step; best of 5 runs of %s steps per round" % (lang, "100,000" if quick else "1M"),
                        "ns/step", "lower", "bare %s for-loop calling the step through a pointer" % lang,
                        "tptrain < 1000 ns/step" if tag == "c" else ""))
        rows[-1].error = error
    live = [i for i, p in enumerate(progs) if p[3] is None]
    for r in range(rounds):
        for i in (live if r % 2 == 0 else list(reversed(live))):
            out = run([progs[i][1]] + (["20000"] if quick else []), env={"LD_LIBRARY_PATH": BUILD})
            rows[i].add(grab(r"bare loop ([0-9.]+) ns/step", out, "bare loop"),
                        grab(r"tptrain ([0-9.]+) ns/step", out, "tptrain ns/step"))
    return rows


def call_roundtrip(rounds, quick, tmp):
    row = Row("call-roundtrip", "one C API call on the success path (tpt_tensor_numel: handle check, exception "
              "barrier, out-parameter, NULL status); median of 7 repeats of 20M calls", "ns/call", "lower",
              "the same query in C++ (at::Tensor::numel through a non-inlined function)",
              "overhead < 1 ns (ratio > 0.5)")
    for r in range(rounds):
        out = run([os.path.join(BUILD, "benchmarks/bench_call_roundtrip")])
        row.add(grab(r"^baseline .*?([0-9.]+) ns/call", out, "baseline"),
                grab(r"^tptrain .*?([0-9.]+) ns/call", out, "tptrain"))
    return [row]


def mlp_step(rounds, quick, tmp):
    steps = "300" if quick else "3000"
    hand = Row("mlp-step-libtorch", "tiny MLP (32-64-64-1, batch 64, SGD with momentum) steps/s through the C API, "
               "one intra-op thread; best of 5 runs of %s steps" % steps, "steps/s", "higher",
               "hand-written LibTorch C++ loop, same work, same process", ">= 0.97")
    py = Row("mlp-step-python", "the same MLP through the C API", "steps/s", "higher",
             "python3-torch, the same loop written by hand", ">= 1.3")
    for r in range(rounds):
        outs = {}
        for side in (["python", "c"] if r % 2 == 0 else ["c", "python"]):
            if side == "c":
                outs[side] = run([os.path.join(BUILD, "benchmarks/bench_mlp_step"), steps])
            else:
                outs[side] = run([PY, os.path.join(ROOT, "benchmarks/mlp_step.py"), steps])
        capi = grab(r"^c-api ([0-9.]+)", outs["c"], "c-api")
        hand.add(grab(r"^libtorch ([0-9.]+)", outs["c"], "libtorch"), capi)
        py.add(grab(r"^python ([0-9.]+)", outs["python"], "python"), capi)
    return [hand, py]


def _watch(cmd, accuracy_re, scale, epochs_wanted, goal, limit_s=1800, accuracies=None):
    """Runs a Fashion-MNIST training until its test accuracy (the number
    accuracy_re finds, divided by scale) reaches goal, or until it ends;
    returns (seconds per training epoch list, seconds to goal or None, peak
    resident KB). The example exits 1 when it ends below 90 %: not an error
    here if it trained every epoch. Killed after limit_s."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, start_new_session=True)
    # The child is reaped by os.wait4 below, for its resource usage; until
    # then its pid cannot be reused, so os.kill on it is safe.
    timer = threading.Timer(limit_s, lambda: os.kill(p.pid, signal.SIGKILL))
    timer.start()
    epochs, t_goal, tail, read_all = [], None, [], False
    try:
        for line in p.stdout:
            tail = (tail + [line])[-30:]
            m = re.search(r"Epoch \d+ \(global_step \d+\) finished, time: ([0-9.]+)", line)
            if m:
                epochs.append(float(m.group(1)))
            m = re.search(accuracy_re, line)
            if m and accuracies is not None:
                accuracies.append(float(m.group(1)) / scale)
            if m and t_goal is None and float(m.group(1)) / scale >= goal:
                t_goal = time.monotonic() - t0
                os.kill(p.pid, signal.SIGTERM)
                break
        p.stdout.read()
        read_all = True
    finally:
        if not read_all:  # an exception here: make sure the child ends
            os.kill(p.pid, signal.SIGKILL)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = 0  # reaped here; keep Popen from waiting again
        p.stdout.close()
        timer.cancel()
    code = os.waitstatus_to_exitcode(status)
    if time.monotonic() - t0 >= limit_s:
        raise RuntimeError("%s ran past %d s:\n%s" % (" ".join(cmd), limit_s, "".join(tail)))
    if t_goal is None and code != 0 and len(epochs) < epochs_wanted:
        raise RuntimeError("%s failed (exit %d):\n%s" % (" ".join(cmd), code, "".join(tail)))
    if not epochs:
        raise RuntimeError("%s printed no epoch time:\n%s" % (" ".join(cmd), "".join(tail)))
    return epochs, t_goal, usage.ru_maxrss


def fashion_mnist(rounds, quick, tmp):
    epochs, goal = ("1", 0.85) if quick else ("5", 0.90)
    images_per_epoch = 468 * 128
    gpu = DEVICE != "cpu"
    dev_args = ["--device", DEVICE] if gpu else []
    base = "PyTorch" if gpu else "python3-torch"
    ips = Row(on_device("fashion-mnist-images"),
              "Fashion-MNIST CNN (the example: tensorpack's mnist-convnet recipe, batch 128, Adam) training images/s, " +
              ("on %s (tptrain: `--device %s`, one tower there, the variables and Adam on the CPU; PyTorch: the "
               "network and the whole data set on the device)" % (DEVICE, DEVICE) if gpu else
               "each library's default threads (tptrain: one per core, python3-torch 1.13: half the logical CPUs, "
               "so 1 on 2 cores without hyperthreads)"), "images/s", "higher",
              base + ", the same network, data in memory, a plain loop",
              ">= 1.0" if gpu else ">= 1.1")
    t90 = Row(on_device("fashion-mnist-90"), "wall time from start until the test accuracy (10,000 images, after each "
              "epoch) reaches %.0f %%, at most %s epochs" % (100 * goal, epochs), "s", "lower",
              base + ", as above", ">= 1.0")
    rss = Row(on_device("fashion-mnist-rss"), "peak resident memory of that run (until %.0f %%)" % (100 * goal), "MB",
              "lower", base + ", as above", ">= 1.0")
    for r in range(rounds):
        got = {}
        for side in (["python", "tptrain"] if r % 2 == 0 else ["tptrain", "python"]):
            if side == "tptrain":
                logdir = os.path.join(tmp, "fm%d" % r)
                got[side] = _watch([os.path.join(BUILD, "examples/fashion_mnist")] + dev_args + [logdir, DATA, epochs],
                                   r"validation_accuracy: ([0-9.]+)", 1.0, int(epochs), goal)
            else:
                got[side] = _watch([PY, os.path.join(ROOT, "benchmarks/fashion_mnist.py")] + dev_args + [epochs, DATA],
                                   r"test accuracy: ([0-9.]+) %", 100.0, int(epochs), goal)
        b, t = got["python"], got["tptrain"]
        ips.add(images_per_epoch / statistics.mean(b[0]), images_per_epoch / statistics.mean(t[0]))
        t90.add(b[1], t[1])
        rss.add(b[2] / 1024.0, t[2] / 1024.0)
    return [ips, t90, rss]


# Training FLOPs per image of the example's network (forward multiply-adds x 2,
# backward twice the forward), for the achieved GFLOP/s next to the peak.
def _fashion_mnist_flops_per_image():
    convs = [(28 * 28, 32, 5 * 5 * 1), (14 * 14, 32, 3 * 3 * 32), (14 * 14, 32, 3 * 3 * 32), (7 * 7, 32, 3 * 3 * 32)]
    forward = sum(2 * pixels * out * k for pixels, out, k in convs) + 2 * (32 * 7 * 7 * 512 + 512 * 10)
    return 3 * forward


def fashion_mnist_precision(rounds, quick, tmp):
    """bf16-mixed training of the example against python3-torch in float32 and
    with autocast bf16 + channels-last, on CPUs that compute bfloat16
    natively; elsewhere the rows say why they were not run."""
    epochs, goal = ("1", 0.85) if quick else ("5", 0.90)
    peak = run([PY, os.path.join(ROOT, "benchmarks/matmul_peak.py")])
    p32, p16 = grab(r"^peak-fp32-gflops ([0-9.]+)", peak, "fp32 peak"), grab(r"^peak-bf16-gflops ([0-9.]+)", peak, "bf16")
    native = "native-bf16 yes" in peak
    flops = _fashion_mnist_flops_per_image()
    peaks = "this machine's measured matmul peak: %.0f GFLOP/s float32, %.0f GFLOP/s bfloat16" % (p32, p16)
    t90 = Row("fashion-mnist-bf16-90", "the example with --bf16 (bf16-mixed precision): wall time until the test "
              "accuracy reaches %.0f %%, at most %s epochs; %s" % (100 * goal, epochs, peaks), "s", "lower",
              "python3-torch in float32, the same network and data", ">= 2.5")
    hand = Row("fashion-mnist-bf16-hand", "the example with --bf16: training images/s (achieved GFLOP/s in the "
               "log: %.1f MFLOP per image); %s" % (flops / 1e6, peaks), "images/s", "higher",
               "python3-torch with torch.autocast bf16, channels-last model and images and a thread per CPU (by hand)", ">= 1.1")
    acc = Row("fashion-mnist-bf16-accuracy", "the test accuracy the example with --bf16 reaches within %s epochs "
              "(the run stops at %.0f %%)" % (epochs, 100 * goal), "%", "higher",
              "python3-torch in float32, as above", ">= 0.99, both >= %.0f %%" % (100 * goal))
    rows = [t90, hand, acc]
    if not native:
        why = ("this CPU has no AVX-512 BF16 or AMX-BF16: LibTorch emulates bfloat16 (its matmul peak here is %.0f "
               "GFLOP/s against %.0f in float32), so a bf16 run would take hours and says nothing about the "
               "library; run it on a CPU with native bfloat16" % (p16, p32))
        for row in rows:
            row.skipped = why
        return rows
    images_per_epoch = 468 * 128
    for r in range(rounds):
        got, reached = {}, {}
        sides = ["python", "python-bf16", "tptrain-bf16"]
        for side in (sides if r % 2 == 0 else sides[::-1]):
            reached[side] = []
            if side == "tptrain-bf16":
                cmd = [os.path.join(BUILD, "examples/fashion_mnist"), "--bf16", os.path.join(tmp, "fmp%d" % r), DATA]
                got[side] = _watch(cmd + [epochs], r"validation_accuracy: ([0-9.]+)", 1.0, int(epochs), goal,
                                   accuracies=reached[side])
            else:
                cmd = [PY, os.path.join(ROOT, "benchmarks/fashion_mnist.py")] + (["--bf16"] if "bf16" in side else [])
                got[side] = _watch(cmd + [epochs, DATA], r"test accuracy: ([0-9.]+) %", 100.0, int(epochs), goal,
                                   accuracies=reached[side])
        t90.add(got["python"][1], got["tptrain-bf16"][1])
        hand.add(images_per_epoch / statistics.mean(got["python-bf16"][0]),
                 images_per_epoch / statistics.mean(got["tptrain-bf16"][0]))
        acc.add(100 * max(reached["python"]), 100 * max(reached["tptrain-bf16"]))
        print("  round %d: tptrain bf16 achieves %.0f GFLOP/s (peak bf16 %.0f), python3-torch by hand %.0f" % (
            r + 1, flops * images_per_epoch / statistics.mean(got["tptrain-bf16"][0]) / 1e9, p16,
            flops * images_per_epoch / statistics.mean(got["python-bf16"][0]) / 1e9), flush=True)
    return rows


def prefetch_overlap(rounds, quick, tmp):
    steps = "30" if quick else "100"
    row = Row("prefetch-overlap", "ms per step of a 20 ms step fed by a 15 ms-per-batch dataflow through the "
              "default input (a queue filled by a thread); %s steps" % steps, "ms/step", "lower",
              "the same training fed naively (FeedInput: make a batch, then train on it)",
              ">= 1.66 (prefetch within 5 % of max(C, D) = 20 ms)")
    for r in range(rounds):
        out = run([os.path.join(BUILD, "benchmarks/bench_prefetch_overlap"), "20", "15", steps])
        row.add(grab(r"^naive feed .*?([0-9.]+) ms/step", out, "naive"),
                grab(r"^default prefetch .*?([0-9.]+) ms/step", out, "prefetch"))
    return [row]


def dataflow_speed(rounds, quick, tmp):
    batches = "50" if quick else "300"
    row = Row("dataflow-speed", "Fashion-MNIST batches of 128 (decode, normalize, pad and random crop, flip, batch) "
              "with 2 worker threads; %s batches after 10 warm-up" % batches, "images/s", "higher",
              "python3-torch DataLoader doing the same work, 2 worker processes", ">= 1.0")
    for r in range(rounds):
        got = {}
        for side in (["python", "tptrain"] if r % 2 == 0 else ["tptrain", "python"]):
            if side == "tptrain":
                out = run([os.path.join(BUILD, "tools/test_data_speed"), "--augment", "--threads", "2", "--count",
                           batches, "--warmup", "10"])
                got[side] = grab(r"([0-9.]+) images/s\s*$", out, "images/s")
            else:
                out = run([PY, os.path.join(ROOT, "benchmarks/dataflow_speed.py"), "2", batches])
                got[side] = grab(r"^python-dataloader ([0-9.]+) images/s", out, "images/s")
        row.add(got["python"], got["tptrain"])
    return [row]


def towers_scaling(rounds, quick, tmp):
    steps, batch = ("4", "64") if quick else ("60", "128")
    out = run([os.path.join(BUILD, "benchmarks/bench_towers_scaling"), str(rounds), steps, batch])
    per = [list(map(float, m.group(1).split())) for m in re.finditer(r"^# round \d+:([0-9. ]+) images/s", out, re.M)]
    if len(per) != rounds or any(len(v) != 7 for v in per):
        raise RuntimeError("bench_towers_scaling printed %d rounds:\n%s" % (len(per), out))
    # columns: 1 tower x 2 threads, 1 tower x 1 thread, 2 replicated, overlap off, 2 parameter server,
    # 2 replicated with the BLAS's pool kept, 2 independent trainers
    a = Row("towers-scaling", "CNN images/s (conv 5x5 32, pool, conv 3x3 64, pool, fc 10; a batch of %s per step in "
            "all, %s steps), 2 replicated CPU towers x 1 thread, buckets reduced during the backward pass"
            % (batch, steps), "images/s", "higher", "1 tower x 2 intra-op threads (LibTorch's own "
            "parallelism over the same 2 cores)", ">= 0.95")
    b = Row("towers-scaling-1", "the same 2 towers", "images/s", "higher", "1 tower x 1 thread", ">= 1.7")
    c = Row("towers-scaling-sync", "the same 2 towers", "images/s", "higher",
            "2 independent trainers x 1 thread at once in one process, each half the batch (the two cores' "
            "ceiling for this work at that moment: no synchronisation)", "")
    for v in per:
        a.add(v[0], v[2])
        b.add(v[1], v[2])
        c.add(v[6], v[2])
    return [a, b, c]


def dist_scaling(rounds, quick, tmp):
    args = [str(rounds)] + (["4", "64"] if quick else [])
    out = run([os.path.join(ROOT, "benchmarks/dist_scaling.sh")] + args, timeout=1800)
    per = []
    for m in re.finditer(r"^# round \d+:(.*) images/s", out, re.M):
        per.append({k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", m.group(1))})
    if len(per) != rounds:
        raise RuntimeError("dist_scaling.sh printed %d rounds:\n%s" % (len(per), out))
    ddp = Row("dist-vs-ddp", "CNN images/s of 2 processes x 1 thread, batch 256 each, started by tptrain-run, "
              "gradients all-reduced over Gloo on loopback", "images/s", "higher",
              "PyTorch DDP (python3-torch, Gloo), same model, batch and processes", ">= 1.0")
    eff = Row("dist-scaling", "the same 2-process job (scaling efficiency)", "images/s", "higher",
              "2 x one process training alone", ">= 0.9")
    for v in per:
        ddp.add(v["ddp"], v["two"])
        eff.add(2 * v["one"], v["two"])
    return [ddp, eff]


def memory_growth(rounds, quick, tmp):
    steps = 3000 if quick else 10000
    row = Row("memory-growth", "resident memory of a long run as a user writes it (tools/soak: an MLP fed by a "
              "queue, an inference runner each epoch, a log directory) after %d steps" % steps, "MB", "lower",
              "the same run after 1,000 steps", ">= 0.99 (no growth)")
    for r in range(rounds):
        out = run([os.path.join(BUILD, "tools/soak"), str(steps), "1000", os.path.join(tmp, "soak%d" % r)])
        rss = {int(m.group(1)): float(m.group(2)) / 1024.0
               for m in re.finditer(r"step\s+(\d+)\s.*?rss\s+(\d+) KB", out)}
        if 1000 not in rss or steps not in rss:
            raise RuntimeError("soak printed no memory at steps 1000 and %d:\n%s" % (steps, out))
        row.add(rss[1000], rss[steps])
    return [row]


def checkpoint(rounds, quick, tmp):
    reps = "3" if quick else "10"
    save = Row("checkpoint-save", "save an MLP's whole training state (1.86 M parameters, Adam's slots, counters): "
               "atomic, fsync'ed; median of %s" % reps, "ms", "lower",
               "torch.save of the same state, as durable: temporary file, fsync, rename, fsync of the folder", ">= 1.0")
    load = Row("checkpoint-restore", "restore it (read, check every field, decode, copy into the variables)", "ms",
               "lower", "torch.load + load_state_dict (both sides read from a warm page cache)", ">= 1.0")
    d = os.path.join(tmp, "ckpt")
    os.makedirs(d, exist_ok=True)
    for r in range(rounds):
        got = {}
        for side in (["python", "tptrain"] if r % 2 == 0 else ["tptrain", "python"]):
            if side == "tptrain":
                got[side] = run([os.path.join(BUILD, "benchmarks/bench_checkpoint"), d, reps])
            else:
                got[side] = run([PY, os.path.join(ROOT, "benchmarks/checkpoint.py"), d, reps])
        t, p = got["tptrain"], got["python"]
        save.add(grab(r"^save-ms ([0-9.]+)", p, "save-ms"), grab(r"^save-ms ([0-9.]+)", t, "save-ms"))
        load.add(grab(r"^load-ms ([0-9.]+)", p, "load-ms"), grab(r"^restore-ms ([0-9.]+)", t, "restore-ms"))
    return [save, load]


def resnet18(rounds, quick, tmp):
    batch, steps, repeats = ("8", "2", "2") if quick else ("256", "20", "5")
    row = Row(on_device("resnet18-images"), "a ResNet-18-sized CNN (its CIFAR form, 11.2M variables, batch norm) on "
              "random 3x32x32 images, batch %s, SGD with momentum, on %s (tptrain: `tools/gpu_check --speed`, one "
              "tower there, the variables and the update on the CPU): training images/s, the median of %s epochs "
              "of %s steps after a warm-up epoch, each timed with the device synchronised" % (
                  batch, DEVICE, repeats, steps), "images/s", "higher",
              "PyTorch, the same network and data, all on the device (benchmarks/resnet18.py)", ">= 1.0")
    if DEVICE == "cpu" and not quick:
        row.skipped = ("GPU work (a step of batch 256 takes seconds on a CPU): `benchmarks/run all --device cuda:0` "
                       "on a GPU machine (scripts/gpu-check); `--quick` runs it small here")
        return [row]
    args = ["--device", DEVICE, "--batch", batch, "--steps", steps, "--repeats", repeats]
    for r in range(rounds):
        got = {}
        for side in (["python", "tptrain"] if r % 2 == 0 else ["tptrain", "python"]):
            cmd = ([os.path.join(BUILD, "tools/gpu_check"), "--speed"] if side == "tptrain" else
                   [PY, os.path.join(ROOT, "benchmarks/resnet18.py")])
            got[side] = grab(r"images/s: ([0-9.]+)", run(cmd + args), side + "'s images/s")
        row.add(got["python"], got["tptrain"])
    return [row]


BENCHMARKS = [
    ("loop-overhead", loop_overhead, ["benchmarks/bench_loop_overhead"]),
    ("call-roundtrip", call_roundtrip, ["benchmarks/bench_call_roundtrip"]),
    ("mlp-step", mlp_step, ["benchmarks/bench_mlp_step"]),
    ("fashion-mnist", fashion_mnist, ["examples/fashion_mnist"]),
    ("fashion-mnist-precision", fashion_mnist_precision, ["examples/fashion_mnist"]),
    ("prefetch-overlap", prefetch_overlap, ["benchmarks/bench_prefetch_overlap"]),
    ("dataflow-speed", dataflow_speed, ["tools/test_data_speed"]),
    ("towers-scaling", towers_scaling, ["benchmarks/bench_towers_scaling"]),
    ("dist-scaling", dist_scaling, ["benchmarks/bench_dist_scaling", "tools/tptrain-run"]),
    ("memory-growth", memory_growth, ["tools/soak"]),
    ("checkpoint", checkpoint, ["benchmarks/bench_checkpoint"]),
    ("resnet18", resnet18, ["tools/gpu_check"]),
]


# ------------------------------------------------------------------- report

def sh(cmd):
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                              timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine():
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mem = next((int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0)
    debian = open("/etc/debian_version").read().strip() if os.path.exists("/etc/debian_version") else "?"
    return "%d cores (%s), %.0f GiB, Debian %s, Linux %s %s" % (
        os.cpu_count(), cpu, mem / 1048576.0, debian, platform.release(), platform.machine())


def blas_in_use():
    info = sh([os.path.join(BUILD, "examples/hello")])
    lines = [l for l in info.split("\n") if l.startswith(("intra-op threads:", "BLAS:"))]
    return "; ".join(lines) if lines else "?"


def versions():
    def deb(pkg):
        v = sh(["dpkg-query", "-W", "-f", "${Version}", pkg])
        return v if v and "no packages" not in v else "not installed"
    commit = sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"])
    # sh() strips the output, the first line's leading status blank with it: split, not slice
    changed = [l.split(None, 1)[1] for l in sh(["git", "-C", ROOT, "status", "--porcelain", "-uno"]).split("\n")
               if len(l.split(None, 1)) == 2]
    dirty = " with uncommitted changes to %s" % ", ".join(changed) if changed else ""
    out = [("tptrain", "%s%s" % (commit or "?", dirty)),
           ("LibTorch (libtorch-dev)", deb("libtorch-dev")),
           ("python3-torch", deb("python3-torch")),
           ("python3", sh([PY, "--version"]).replace("Python ", "")),
           ("its torch", sh([PY, "-c", "import torch; print(torch.__version__, 'CUDA', torch.version.cuda)"])),
           ("OpenBLAS (libopenblas0-openmp)", deb("libopenblas0-openmp")),
           ("the BLAS and threads tptrain runs with (tpt_build_info)", blas_in_use()),
           ("Gloo (libgloo-dev)", deb("libgloo-dev")),
           ("C compiler", sh(["cc", "--version"]).split("\n")[0])]
    if shutil.which("rustc"):
        out.append(("Rust", sh(["rustc", "--version"])))
    if shutil.which("go"):
        out.append(("Go", sh(["go", "version"])))
    if DEVICE != "cpu" and shutil.which("nvidia-smi"):
        out.append(("GPU (nvidia-smi: name, driver)", sh(["nvidia-smi", "--query-gpu=name,driver_version",
                                                          "--format=csv,noheader"]).split("\n")[0]))
    return out


def fmt(v):
    if v is None:
        return "-"
    if v >= 100:
        return "%.0f" % v
    if v >= 10:
        return "%.1f" % v
    return "%.2f" % v


def med(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def report(rows, rounds, started, seconds, quick, main_table):
    L = ["# Benchmarks", "",
         "Written by `benchmarks/run all` (benchmarks/all.py) on %s in %.1f minutes; run it again to "
         "reproduce every figure on your machine. One benchmark alone: `benchmarks/run NAME` "
         "(`benchmarks/run` lists them)." % (started.strftime("%Y-%m-%d %H:%M UTC"), seconds / 60), ""]
    if main_table:
        L += ["The LibTorch-bound rows on Debian 13's LibTorch 2.6 and python3-torch 2.6: "
              "[benchmarks-libtorch-2.6.md](benchmarks-libtorch-2.6.md) (`benchmarks/run all --only "
              "mlp-step,fashion-mnist --rounds 3 --out docs/benchmarks-libtorch-2.6.md` in a Debian 13 chroot).", ""]
    if quick:
        L += ["**A smoke test (`--quick`): shortened measurements, not figures to quote.**", ""]
    if rounds < 5:
        L += ["**%d rounds only: the figures below need at least 5.**" % rounds, ""]
    L += ["Every benchmark ran %d rounds in this one invocation. A round measures tptrain and its baseline "
          "once each, alternating which goes first; the pairs that one program measures itself (loop overhead, "
          "call round trip, the hand-written LibTorch loop, prefetch, towers) are interleaved inside it, "
          "repeat by repeat. The figures are each side's median over the rounds; the ratio is computed per "
          "round, from two sides measured under the same conditions (tptrain / baseline for rates, "
          "baseline / tptrain for times and memory, so **above 1 means tptrain is ahead**), and given as its "
          "median with the min and max. Where the rounds vary a lot (this machine is shared), the median "
          "ratio and the ratio of the two medians can point different ways; the per-round ratio is the "
          "figure to read. A row measured in fewer rounds than the others says so." % rounds, "",
          "## Machine", "", machine(), "", "## Versions", "", "| | |", "|---|---|"]
    L += ["| %s | %s |" % kv for kv in versions()]
    L += ["", "## Results", "",
          "| benchmark | unit | baseline | baseline's figure | tptrain's figure | ratio (median) | min | max | goal |",
          "|---|---|---|--:|--:|--:|--:|--:|---|"]
    for row in rows:
        if row.error:
            L.append("| %s | %s | %s | | | failed | | | %s |" % (row.key, row.unit, row.baseline, row.goal))
            continue
        if row.skipped:
            L.append("| %s | %s | %s | | | not run here | | | %s |" % (row.key, row.unit, row.baseline, row.goal))
            continue
        rs = row.ratios()
        short = " (%d of %d rounds)" % (len(rs), rounds) if len(rs) < rounds else ""
        L.append("| %s | %s | %s | %s | %s | **%s**%s | %s | %s | %s |" % (
            row.key, row.unit, row.baseline, fmt(med(row.base)), fmt(med(row.tpt)),
            "%.3f" % statistics.median(rs) if rs else "-", short, "%.3f" % min(rs) if rs else "-",
            "%.3f" % max(rs) if rs else "-", row.goal))
    L += ["", "## What each row measures", ""]
    for row in rows:
        L.append("- **%s**: %s. Baseline: %s.%s" % (row.key, row.what, row.baseline,
                                                   " **Not run here**: %s." % row.skipped if row.skipped else ""))
    L += ["", "## Every round", "", "baseline / tptrain, in each row's unit.", ""]
    for row in rows:
        if row.error:
            L += ["- **%s** failed:" % row.key, "", "```", row.error.strip()[-1500:], "```", ""]
            continue
        L.append("- **%s**: %s" % (row.key, ", ".join("%s / %s" % (fmt(b), fmt(t))
                                                      for b, t in zip(row.base, row.tpt))))
    return "\n".join(L) + "\n"


def main():
    global BUILD, DEVICE, PY, DATA
    ap = argparse.ArgumentParser(prog="benchmarks/run all", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="", help="comma-separated benchmark names")
    ap.add_argument("--out", help="the table (default: docs/benchmarks.md for a full run of at least 5 "
                    "rounds, else build/benchmarks-partial.md, so that a partial run never replaces it)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--build", default=BUILD)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--device", default=DEVICE)
    ap.add_argument("--python", default=PY)
    ap.add_argument("--data", default=DATA)
    a = ap.parse_args()
    BUILD = os.path.abspath(a.build)
    DEVICE, PY, DATA = a.device, a.python, os.path.abspath(a.data)
    names = [n for n, _, _ in BENCHMARKS]
    only = [n for n in a.only.split(",") if n]
    for n in only:
        if n not in names:
            ap.error("unknown benchmark '%s'; they are: %s" % (n, ", ".join(names)))
    if not 1 <= a.rounds <= 99:
        ap.error("--rounds wants 1 to 99")
    if a.out is None:
        full = not only and not a.quick and a.rounds >= 5 and DEVICE == "cpu"
        a.out = os.path.join(ROOT, "docs/benchmarks.md") if full else os.path.join(BUILD, "benchmarks-partial.md")
    chosen = [b for b in BENCHMARKS if not only or b[0] in only]
    if not a.no_build:
        if not os.path.exists(os.path.join(BUILD, "build.ninja")):
            subprocess.run(["meson", "setup", BUILD], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        targets = sorted({t for _, _, ts in chosen for t in ts})
        subprocess.run(["ninja", "-C", BUILD] + targets, check=True, stdout=subprocess.DEVNULL)
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.monotonic()
    rows, failed = [], 0
    with tempfile.TemporaryDirectory(prefix="tptrain-bench-") as tmp:
        for name, fn, _ in chosen:
            t = time.monotonic()
            print("%s ..." % name, end="", flush=True)
            try:
                got = fn(a.rounds, a.quick, tmp)
            except Exception as e:  # a failed benchmark is a row that says so; the others go on
                failed += 1
                got = [Row(name, "", "", "higher", "")]
                got[0].error = str(e)
            rows += got
            failed += sum(1 for row in got if row.error and row.what)  # a row of a benchmark that went on
            print(" %.0f s" % (time.monotonic() - t), flush=True)
            for row in got:
                rs = row.ratios()
                print("  %-22s %s" % (row.key, "FAILED: " + row.error.strip().split("\n")[0] if row.error else
                                      "baseline %s, tptrain %s %s, ratio %.3f (min %.3f, max %.3f)" % (
                                          fmt(med(row.base)), fmt(med(row.tpt)), row.unit, statistics.median(rs),
                                          min(rs), max(rs)) if rs else "no ratio"), flush=True)
    seconds = time.monotonic() - t0
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(report(rows, a.rounds, started, seconds, a.quick,
                       os.path.abspath(a.out) == os.path.join(ROOT, "docs", "benchmarks.md")))
    print("wrote %s (%.1f minutes)" % (os.path.relpath(a.out), seconds / 60))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
