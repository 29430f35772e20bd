#!/usr/bin/python3
"""The equivalence matrix's model (tests/c/test_equivalence.c) trained by a
job of 2 tptrain ranks and by PyTorch DDP (python3-torch, Gloo, 2 processes)
from the same initial values on the same data split: a strided VALID and a
SAME convolution, LayerNorm over C x H x W, cross-entropy plus an L2 term
over the kernels, AdamW with weight decay, clip_grad_norm_ and a step-based
learning-rate change, 2 epochs of 12 steps, each rank a batch of 8 rows.
Every parameter must be within 1e-5 (relative to the largest value) of
DDP's. And a rank whose peer never comes gives up at the timeout, without
glog's warning about logging before InitGoogleLogging().

The data and the initial values are computed here with the C program's
formulas (math.sin: glibc's sin, as the C program's).

Prints TAP. usage: test_equivalence_ddp.py PATH/TO/test_equivalence"""
import math
import os
import socket
import subprocess
import sys
import tempfile
import traceback

import torch
import torch.nn.functional as F

# PyTorch 2.4+ opens tcp:// stores with libuv unless told not to; Debian's
# python3-torch is built without it (1.13 ignores the variable).
os.environ["USE_LIBUV"] = "0"

PROGRAM = sys.argv[1]
SIDE, CLASSES, B, STEPS_PER_EPOCH, EPOCHS = 9, 4, 8, 12, 2
ROWS = STEPS_PER_EPOCH * 2 * B
TOL = 1e-5
# The model's variables in creation order (the C program's init hook numbers them so).
SHAPES = [("conv1/W", (4, 1, 3, 3)), ("conv1/b", (4,)), ("conv2/W", (4, 4, 3, 3)), ("conv2/b", (4,)),
          ("conv_ln/gamma", (4,)), ("conv_ln/beta", (4,)), ("fc/W", (CLASSES, 64)), ("fc/b", (CLASSES,))]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def data():
    xs = torch.empty(ROWS, 1, SIDE, SIDE)
    ys = torch.empty(ROWS, dtype=torch.long)
    flat = xs.view(ROWS, -1)
    for i in range(ROWS):
        s = 0.0
        for j in range(SIDE * SIDE):
            v = float(torch.tensor(math.sin(0.37 * i + 0.91 * j + 0.05 * i * j), dtype=torch.float32))
            flat[i, j] = v
            s += v * ((j % 3) - 1)
        ys[i] = (i * 7 + (1 if s > 0 else 0) + (1 if s > 2 else 0)) % CLASSES
    return xs, ys


def initial_values():
    out = []
    for k, (name, shape) in enumerate(SHAPES):
        n = math.prod(shape)
        base = 1.0 if "gamma" in name else 0.0
        vals = [base + 0.4 * math.sin(1.7 * i + 0.9 * k) for i in range(n)]
        out.append(torch.tensor(vals, dtype=torch.float32).view(shape))
    return out


def ddp_worker(rank, world, port, out):
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    xs, ys = data()

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = torch.nn.ParameterList([torch.nn.Parameter(t.clone()) for t in initial_values()])

        def forward(self, x):
            w1, b1, w2, b2, gamma, beta, wf, bf = self.p
            h = F.conv2d(x, w1, b1, stride=2)  # VALID, 9x9 -> 4x4
            h = F.relu(F.conv2d(h, w2, b2, padding=1))  # SAME
            mean = h.mean(dim=(1, 2, 3), keepdim=True)
            c = h.sub(mean)
            var = c.mul(c).mean(dim=(1, 2, 3), keepdim=True)
            h = c.mul(var.add(1e-5).rsqrt()).mul(gamma.view(1, 4, 1, 1)).add(beta.view(1, 4, 1, 1))
            return F.linear(h.flatten(1), wf, bf)

    net = Net()
    model = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.05)
    batches = ROWS // B
    for step in range(1, STEPS_PER_EPOCH * EPOCHS + 1):
        k = ((step - 1) * world + rank) % batches  # the rank's batch, as tptrain's shard
        xb, yb = xs[k * B:(k + 1) * B], ys[k * B:(k + 1) * B]
        w1, _, w2, _, _, _, wf, _ = net.p
        l2 = w1.pow(2).sum().add(w2.pow(2).sum()).add(wf.pow(2).sum()).mul(2e-3)
        loss = F.cross_entropy(model(xb), yb).add(l2)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        if step == 9:  # the step-based schedule {0: 0.01, 9: 0.004}: set after global_step 9
            for g in opt.param_groups:
                g["lr"] = 0.004
    if rank == 0:
        torch.cat([t.detach().reshape(-1) for t in net.p]).numpy().tofile(out)
    dist.destroy_process_group()


def tptrain_job(root):
    port = free_port()
    outs = [os.path.join(root, "tptrain-r%d.bin" % r) for r in range(2)]
    procs = [subprocess.Popen([PROGRAM, "--rank", str(r), "--port", str(port), "--variant", "0", "--out", outs[r],
                               "--logdir", "-", "--fail-at", "0", "--restore", "-"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(2)]
    for r, p in enumerate(procs):
        text, _ = p.communicate(timeout=300)
        if p.returncode != 0:
            raise AssertionError("tptrain rank %d exited with %d:\n%s" % (r, p.returncode, text))
        assert "Logging before InitGoogleLogging" not in text, text
    import numpy
    return torch.from_numpy(numpy.fromfile(outs[0], dtype=numpy.float32))


def test_two_ranks_equal_ddp(root):
    import torch.multiprocessing as mp
    ours = tptrain_job(root)
    out = os.path.join(root, "ddp.bin")
    mp.spawn(ddp_worker, args=(2, free_port(), out), nprocs=2, join=True)
    import numpy
    theirs = torch.from_numpy(numpy.fromfile(out, dtype=numpy.float32))
    assert ours.numel() == theirs.numel() == sum(math.prod(s) for _, s in SHAPES), (ours.numel(), theirs.numel())
    start = torch.cat([t.reshape(-1) for t in initial_values()])
    moved = ((theirs - start).abs().max() / start.abs().max()).item()
    assert moved > 1e-2, "DDP's training barely moved the parameters (%.3g): the comparison would prove nothing" % moved
    err = ((ours - theirs).abs().max() / theirs.abs().max().clamp_min(1e-12)).item()
    print("# 2 tptrain ranks vs PyTorch DDP: relative distance %.3g (the training moved the values by %.3g)"
          % (err, moved))
    assert err <= TOL, "2 tptrain ranks differ from PyTorch DDP by %.3g (relative), more than %g" % (err, TOL)


def test_a_rank_alone_gives_up_at_the_timeout(root):
    """Rank 1 of 2 whose rank 0 never comes: it fails within the timeout
    (plus a second), naming itself, and its output has no glog warning
    about logging before InitGoogleLogging()."""
    import time
    start = time.monotonic()
    p = subprocess.run([PROGRAM, "--rank", "1", "--port", str(free_port()), "--variant", "0",
                        "--out", os.path.join(root, "alone.bin"), "--logdir", "-", "--fail-at", "0",
                        "--restore", "-", "--timeout-ms", "3000"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    took = time.monotonic() - start
    print("# rank 1 alone, timeout 3 s: exited %d after %.2f s" % (p.returncode, took))
    assert p.returncode == 1, "exit status %d:\n%s" % (p.returncode, p.stdout)
    assert "rank 1 of 2" in p.stdout, p.stdout
    assert took < 4.5, "gave up after %.2f s, the timeout is 3 s:\n%s" % (took, p.stdout)
    assert "Logging before InitGoogleLogging" not in p.stdout, p.stdout


def main():
    tests = [test_two_ranks_equal_ddp, test_a_rank_alone_gives_up_at_the_timeout]
    print("TAP version 13")
    print("1..%d" % len(tests))
    failed = 0
    with tempfile.TemporaryDirectory() as root:
        for i, fn in enumerate(tests, 1):
            try:
                fn(root)
                print("ok %d - %s" % (i, fn.__name__))
            except Exception:
                failed += 1
                print("not ok %d - %s" % (i, fn.__name__))
                for line in traceback.format_exc().splitlines():
                    print("# " + line)
            sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
