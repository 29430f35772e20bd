#!/usr/bin/python3
"""Distributed training in real processes (issue 15): the parity MLP
(tests/c/dist_mlp.c) trained 50 steps with SGD + momentum by 2 and 4 ranks
over Gloo on loopback

  - equals one process fed the concatenated batches (1e-5 relative), and
    every rank ends with the same parameters, bit for bit, although the
    ranks other than 0 start from other values (rank 0's are broadcast);
  - equals PyTorch DDP (python3-torch, Gloo, processes started with
    torch.multiprocessing and a tcp:// init method) from the same initial
    values and data (1e-5);
  - with 2 towers per rank, equals one process fed 4 batches a step;
  - with average_scalars, every rank reports the mean of the ranks' costs;
  - trains the same when started by hand with exactly torchrun's variables
    instead of tools/tptrain-run;
  - with one of 4 ranks killed mid-training, the others exit non-zero
    within the timeout naming the lost rank, and the launcher returns
    non-zero; a rank that hangs (SIGSTOP) is named after the timeout;
  - killed as a whole job and restarted, resumes from the chief's last
    checkpoint and ends bit-identical to an uninterrupted run.

Prints TAP. usage: test_distributed.py PATH/TO/dist_mlp PATH/TO/tptrain-run"""
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback

import torch

# PyTorch 2.4+ opens tcp:// stores with libuv unless told not to; Debian's
# python3-torch is built without it (1.13 ignores the variable).
os.environ["USE_LIBUV"] = "0"

PROGRAM, LAUNCHER = sys.argv[1], sys.argv[2]
N, D, H, STEPS, BATCH = 512, 8, 16, 50, 8
TOL = 1e-5
NAMES = ["w1", "b1", "w2", "b2"]
SHAPES = {"w1": (H, D), "b1": (H,), "w2": (1, H), "b2": (1,)}

tests = []


def test(fn):
    tests.append(fn)
    return fn


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read(path, shape):
    import numpy
    return torch.from_numpy(numpy.fromfile(path, dtype=numpy.float32).reshape(shape))


def params(out, rank=0):
    return [read(os.path.join(out, "r%d_%s.out" % (rank, n)), SHAPES[n]) for n in NAMES]


def close(a, b, what):
    for n, x, y in zip(NAMES, a, b):
        err = ((x - y).abs().max() / y.abs().max().clamp_min(1e-12)).item()
        if not err <= TOL:
            raise AssertionError("%s: %s differs by %.3g (relative), more than %g" % (what, n, err, TOL))


def identical(a, b, what):
    for n, x, y in zip(NAMES, a, b):
        if not torch.equal(x, y):
            raise AssertionError("%s: %s is not bit-identical (max difference %.3g)" % (what, n, (x - y).abs().max()))


def run(cmd, env=None, timeout=300):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, text=True)
    return p.returncode, p.stdout


def torchrun_env(rank, world, port, run_id="test"):
    """Exactly the variables torchrun 1.13 sets for a worker."""
    env = dict(os.environ)
    env.update({
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank), "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world), "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1",
        "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world), "ROLE_NAME": "default",
        "TORCHELASTIC_RUN_ID": run_id, "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_USE_AGENT_STORE": "False", "TORCHELASTIC_ERROR_FILE": "", "OMP_NUM_THREADS": "1",
    })
    return env


def ddp_worker(rank, world, port, data_dir, out_dir):
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    x, y = read(os.path.join(data_dir, "x.bin"), (N, D)), read(os.path.join(data_dir, "y.bin"), (N, 1))

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            if rank == 0:
                init = [read(os.path.join(data_dir, n + ".bin"), SHAPES[n]) for n in NAMES]
            else:  # DDP broadcasts rank 0's at construction
                init = [torch.randn(SHAPES[n]) for n in NAMES]
            self.w1, self.b1, self.w2, self.b2 = [torch.nn.Parameter(t.clone()) for t in init]

        def forward(self, xb):
            return torch.nn.functional.linear(torch.relu(torch.nn.functional.linear(xb, self.w1, self.b1)), self.w2, self.b2)

    model = torch.nn.parallel.DistributedDataParallel(MLP())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    batches = N // BATCH
    for step in range(STEPS):
        k = (step * world + rank) % batches  # the rank's batch of the step, as dist_mlp's shard
        xb, yb = x[k * BATCH:(k + 1) * BATCH], y[k * BATCH:(k + 1) * BATCH]
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        m = model.module
        for n, t in zip(NAMES, [m.w1, m.b1, m.w2, m.b2]):
            t.detach().contiguous().numpy().tofile(os.path.join(out_dir, "r0_%s.out" % n))
    dist.destroy_process_group()


class Job:
    def __init__(self, root):
        self.root = root
        self.data = os.path.join(root, "data")
        os.makedirs(self.data)
        torch.manual_seed(11)
        x = torch.randn(N, D)
        y = x[:, :1] * 2 - x[:, 1:2] + 0.1 * torch.randn(N, 1)
        init = [torch.randn(H, D) * 0.3, torch.randn(H) * 0.1, torch.randn(1, H) * 0.3, torch.randn(1) * 0.1]
        for name, t in zip(["x", "y"] + NAMES, [x, y] + init):
            t.contiguous().numpy().tofile(os.path.join(self.data, name + ".bin"))
        with open(os.path.join(self.data, "dims.txt"), "w") as f:
            f.write("%d %d %d\n" % (N, D, H))
        self.results = {}

    def out(self, name):
        d = os.path.join(self.root, name)
        os.makedirs(d, exist_ok=True)
        return d

    def single(self, world):
        key = "single%d" % world
        if key not in self.results:
            out = self.out(key)
            rc, log = run([PROGRAM, self.data, out, str(STEPS), str(BATCH * world)])
            assert rc == 0, "one process, batch %d: rc %d\n%s" % (BATCH * world, rc, log)
            self.results[key] = params(out)
        return self.results[key]

    def launched(self, world, *extra, out_name=None):
        out = self.out(out_name or "launched%d" % world)
        cmd = [LAUNCHER, "-n", str(world), "--master-port", str(free_port()), PROGRAM, self.data, out, str(STEPS),
               str(BATCH), "--dist", "--unset-on-others"] + list(extra)
        rc, log = run(cmd)
        return rc, log, out


@test
def two_and_four_ranks_equal_one_process_fed_the_concatenated_batches(job):
    for world in (2, 4):
        rc, log, out = job.launched(world)
        assert rc == 0, "tptrain-run -n %d: rc %d\n%s" % (world, rc, log)
        ranks = [params(out, r) for r in range(world)]
        for r in range(1, world):
            identical(ranks[r], ranks[0], "%d ranks: rank %d vs rank 0" % (world, r))
        close(ranks[0], job.single(world), "%d ranks vs one process with batch %d" % (world, BATCH * world))
        job.results["launched%d" % world] = ranks[0]


@test
def two_ranks_of_two_towers_equal_one_process_of_four_towers_worth(job):
    rc, log, out = job.launched(2, "--towers", "2", out_name="towers2x2")
    assert rc == 0, "tptrain-run -n 2 with 2 towers each: rc %d\n%s" % (rc, log)
    identical(params(out, 1), params(out, 0), "2 ranks x 2 towers: rank 1 vs rank 0")
    close(params(out), job.single(4), "2 ranks x 2 towers vs one process with batch %d" % (BATCH * 4))


@test
def average_scalars_gives_every_rank_the_mean_cost(job):
    rc, log, plain = job.launched(2, out_name="costs_plain")
    assert rc == 0, log
    rc, log, avg = job.launched(2, "--average-scalars", out_name="costs_avg")
    assert rc == 0, log
    c0, c1 = [read(os.path.join(plain, "r%d_costs.bin" % r), (-1,)).double() for r in (0, 1)]
    a0, a1 = [read(os.path.join(avg, "r%d_costs.bin" % r), (-1,)).double() for r in (0, 1)]
    assert c0.numel() == STEPS and not torch.equal(c0, c1), "the ranks' own costs should differ"
    assert torch.equal(a0, a1), "with average_scalars the ranks report different costs"
    err = ((a0 - (c0 + c1) / 2).abs().max() / c0.abs().max()).item()
    assert err < 1e-6, "the averaged cost differs from the mean of the ranks' by %.3g" % err


@test
def the_ranks_equal_pytorch_ddp(job):
    import torch.multiprocessing as mp
    for world in (2, 4):
        out = job.out("ddp%d" % world)
        port = free_port()
        ctx = mp.start_processes(ddp_worker, args=(world, port, job.data, out), nprocs=world, join=True,
                                 start_method="fork")
        ours = job.results.get("launched%d" % world)
        if ours is None:
            rc, log, o = job.launched(world)
            assert rc == 0, log
            ours = params(o)
        close(ours, params(out), "%d ranks vs PyTorch DDP with %d processes" % (world, world))


@test
def started_by_hand_with_torchruns_variables(job):
    out = job.out("by_hand")
    port = free_port()
    procs = [subprocess.Popen([PROGRAM, job.data, out, str(STEPS), str(BATCH), "--dist", "--unset-on-others"],
                              env=torchrun_env(r, 2, port), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(2)]
    logs = [p.communicate(timeout=300)[0] for p in procs]
    for r, p in enumerate(procs):
        assert p.returncode == 0, "rank %d: rc %d\n%s" % (r, p.returncode, logs[r])
    identical(params(out, 1), params(out, 0), "by hand: rank 1 vs rank 0")
    close(params(out), job.single(2), "by hand, 2 ranks vs one process")


@test
def loss_scaled_ranks_skip_together(job):
    """Loss scaling on, and only rank 1's gradients overflow, at steps 3 and 10
    (its cost times 1e36): the all-reduced gradients are not finite on any
    rank, so every rank skips those updates and backs off: the ranks stay
    bit-identical with the same scale at every step, and equal one process fed
    the concatenated batches whose steps 3 and 10 overflow."""
    out = job.out("scaled")
    port = free_port()
    procs = [subprocess.Popen([PROGRAM, job.data, out, str(STEPS), str(BATCH), "--dist", "--loss-scaling"],
                              env=dict(torchrun_env(r, 2, port), **({"TPT_PARITY_OVERFLOW": "3,10"} if r == 1 else {})),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(2)]
    logs = [p.communicate(timeout=300)[0] for p in procs]
    for r, p in enumerate(procs):
        assert p.returncode == 0, "rank %d: rc %d\n%s" % (r, p.returncode, logs[r])
    identical(params(out, 1), params(out, 0), "loss-scaled: rank 1 vs rank 0")
    s0, s1 = [read(os.path.join(out, "r%d_scales.bin" % r), (-1,)) for r in (0, 1)]
    assert s0.numel() == STEPS and torch.equal(s0, s1), "the ranks' scales differ"
    assert s0[3] == s0[2] / 2 and s0[10] == s0[9] / 2, "steps 3 and 10 did not back off: %s" % s0[:12].tolist()
    single = job.out("scaled_single")
    rc, log = run([PROGRAM, job.data, single, str(STEPS), str(BATCH * 2), "--loss-scaling"],
                  env=dict(os.environ, TPT_PARITY_OVERFLOW="3,10"))
    assert rc == 0, log
    assert torch.equal(read(os.path.join(single, "r0_scales.bin"), (-1,)), s0), "one process's scales differ"
    close(params(out), params(single), "loss-scaled: 2 ranks vs one process")
    moved = max((a - b).abs().max().item() for a, b in zip(params(out), job.single(2)))
    assert moved > 1e-3, "skipping two updates changed nothing (%.3g)" % moved


@test
def a_killed_rank_is_named_by_the_others_within_the_timeout(job):
    out = job.out("killed")
    port = free_port()
    timeout_ms = 10000
    procs = []
    for r in range(4):
        procs.append(subprocess.Popen(
            [PROGRAM, job.data, out, "100000", str(BATCH), "--dist", "--timeout-ms", str(timeout_ms), "--die-at", "20",
             "--die-rank", "2"], env=torchrun_env(r, 4, port), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True))
    procs[2].wait(timeout=300)
    killed_at = time.monotonic()
    assert procs[2].returncode == -9, "rank 2 ended with %s, not SIGKILL" % procs[2].returncode
    for r in (0, 1, 3):
        log = procs[r].communicate(timeout=120)[0]
        took = time.monotonic() - killed_at
        assert procs[r].returncode not in (0, None), "rank %d: rc %s\n%s" % (r, procs[r].returncode, log)
        assert "rank 2 is lost" in log, "rank %d does not name rank 2:\n%s" % (r, log)
        assert took < timeout_ms / 1000 + 15, "rank %d took %.1f s after the kill" % (r, took)
        print("# rank %d: rc %d, %.1f s after the kill: %s" % (r, procs[r].returncode, took,
                                                                [l for l in log.splitlines() if "lost" in l][0][:300]))
    rc, log = run([LAUNCHER, "-n", "4", "--master-port", str(free_port()), PROGRAM, job.data, out, "100000",
                   str(BATCH), "--dist", "--timeout-ms", str(timeout_ms), "--die-at", "20", "--die-rank", "2"])
    assert rc != 0, "the launcher returned 0 with a killed rank:\n" + log
    print("# tptrain-run -n 4 with rank 2 killed: rc %d" % rc)


@test
def a_hung_rank_is_named_by_the_others_within_the_timeout(job):
    import signal
    out = job.out("hung")
    port = free_port()
    timeout_ms = 10000  # also the rendezvous's: a loaded machine starts LibTorch slowly
    procs = [subprocess.Popen([PROGRAM, job.data, out, "1000000", str(BATCH), "--dist", "--timeout-ms", str(timeout_ms)],
                              env=torchrun_env(r, 2, port), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(2)]
    try:
        for p in procs:  # both joined the job; then a second of training
            line = p.stdout.readline()
            assert "joined" in line, "a rank did not join: " + line + p.stdout.read()
        time.sleep(1)
        assert procs[0].poll() is None and procs[1].poll() is None, "the job ended early"
        procs[1].send_signal(signal.SIGSTOP)  # hangs: no collectives, no heartbeat
        stopped_at = time.monotonic()
        log = procs[0].communicate(timeout=120)[0]
        took = time.monotonic() - stopped_at
        assert procs[0].returncode not in (0, None), "rank 0: rc %s\n%s" % (procs[0].returncode, log)
        assert "rank 1 is lost" in log, "rank 0 does not name rank 1:\n" + log
        assert took < timeout_ms / 1000 + 10, "rank 0 took %.1f s after rank 1 hung" % took
        print("# rank 0: rc %d, %.1f s after rank 1 hung (timeout %d ms)" % (procs[0].returncode, took, timeout_ms))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()


@test
def a_job_killed_and_restarted_resumes_bit_identically(job):
    logdir = os.path.join(job.root, "restart_logs")
    uninterrupted = job.results.get("launched2")
    if uninterrupted is None:
        rc, log, o = job.launched(2)
        assert rc == 0, log
        uninterrupted = params(o)
    rc, log, out = job.launched(2, "--logdir", logdir, "--save-every", "10", "--die-at", "25", "--die-rank", "0",
                                out_name="restart")
    assert rc != 0, "the job whose rank 0 was killed returned 0:\n" + log
    with open(os.path.join(logdir, "checkpoint")) as f:
        index = f.read()
    assert 'model-20"' in index, "the last checkpoint is not model-20:\n" + index
    rc, log, out = job.launched(2, "--logdir", logdir, "--save-every", "10", out_name="restart")
    assert rc == 0, "the restarted job: rc %d\n%s" % (rc, log)
    costs = read(os.path.join(out, "r1_costs.bin"), (-1,))
    assert costs.numel() == STEPS - 20, "rank 1 ran %d steps after the restart, not %d" % (costs.numel(), STEPS - 20)
    identical(params(out, 0), uninterrupted, "restarted vs uninterrupted")
    identical(params(out, 1), uninterrupted, "restarted rank 1 vs uninterrupted")


@test
def sigterm_to_one_rank_stops_every_rank_at_one_step_and_the_job_resumes_bit_identically(job):
    """stop_on_signals in a 2-rank job (TPTRAIN_STOP_ON_SIGNALS=1, as
    tools/tptrain-run sets it): a SIGTERM to rank 1 alone stops both ranks
    gracefully at the same step (they agree at each step boundary), the
    chief saves a checkpoint there although its ModelSaver saves only every
    1000 steps, and the restarted job ends bit-identical to an uninterrupted one."""
    import signal
    logdir, out = os.path.join(job.root, "sigterm_logs"), job.out("sigterm")
    uninterrupted = job.results.get("launched2")
    if uninterrupted is None:
        rc, log, o = job.launched(2)
        assert rc == 0, log
        uninterrupted = params(o)
    port = free_port()
    args = [PROGRAM, job.data, out, str(STEPS), str(BATCH), "--dist", "--unset-on-others", "--logdir", logdir,
            "--save-every", "1000", "--sleep-us", "30000"]
    procs = [subprocess.Popen(args, env=dict(torchrun_env(r, 2, port), TPTRAIN_STOP_ON_SIGNALS="1"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(2)]
    try:
        for p in procs:
            line = p.stdout.readline()
            assert "joined" in line, "a rank did not join: " + line + p.stdout.read()
        time.sleep(0.5)  # about 15 of the 50 steps
        procs[1].send_signal(signal.SIGTERM)
        logs = [p.communicate(timeout=120)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    for r in range(2):
        assert procs[r].returncode == 0, "rank %d: rc %d\n%s" % (r, procs[r].returncode, logs[r])
    steps = [read(os.path.join(out, "r%d_costs.bin" % r), (-1,)).numel() for r in range(2)]
    assert steps[0] == steps[1], "the ranks stopped at different steps: %r" % steps
    assert 0 < steps[0] < STEPS, "the stop did not land mid-run: %d steps" % steps[0]
    with open(os.path.join(logdir, "checkpoint")) as f:
        index = f.read()
    assert 'model_checkpoint_path: "model-%d"' % steps[0] in index, "no checkpoint at the stop:\n" + index
    rc, log, out = job.launched(2, "--logdir", logdir, "--save-every", "1000", out_name="sigterm")
    assert rc == 0, "the restarted job: rc %d\n%s" % (rc, log)
    costs = read(os.path.join(out, "r1_costs.bin"), (-1,))
    assert costs.numel() == STEPS - steps[0], "rank 1 ran %d steps after the restart, not %d" % (
        costs.numel(), STEPS - steps[0])
    identical(params(out, 0), uninterrupted, "resumed after SIGTERM vs uninterrupted")
    identical(params(out, 1), uninterrupted, "resumed rank 1 vs uninterrupted")
    print("# SIGTERM to rank 1: both ranks stopped after step %d" % steps[0])


def main():
    only = os.environ.get("TPT_TEST_ONLY")  # a part of a test's name: run those only
    if only:
        tests[:] = [t for t in tests if only in t.__name__]
    print("TAP version 13")
    print("1..%d" % len(tests))
    failed = 0
    with tempfile.TemporaryDirectory() as root:
        job = Job(root)
        for i, fn in enumerate(tests, 1):
            start = time.monotonic()
            try:
                fn(job)
                print("ok %d - %s (%.1f s)" % (i, fn.__name__, time.monotonic() - start))
            except Exception:
                failed += 1
                print("not ok %d - %s" % (i, fn.__name__))
                for line in traceback.format_exc().splitlines():
                    print("# " + line)
            sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
