"""Baseline of benchmark checkpoint: the same MLP and Adam state in
python3-torch, saved with torch.save({"model": ..., "optimizer": ...}) with the
durability tptrain's save has (what a careful user writes: a temporary file in
the same folder, flush, os.fsync, os.replace, then os.fsync of the folder, so
that a crash leaves the old file or the new one, never half of one), and
loaded with torch.load + load_state_dict. Before each timed load the file is
read once untimed, as bench_checkpoint does before each timed restore: both
sides read from a warm page cache. Medians of REPS.

usage: checkpoint.py DIR [REPS]"""
import os
import sys
import time

import torch

torch.set_num_threads(1)
d = sys.argv[1]
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
path = os.path.join(d, "torch-checkpoint")

net = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                          torch.nn.ReLU(), torch.nn.Linear(1024, 10))
opt = torch.optim.Adam(net.parameters())
x, y = torch.zeros(32, 784), torch.zeros(32, dtype=torch.long)
for _ in range(3):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(net(x), y).backward()
    opt.step()


def median(v):
    return sorted(v)[len(v) // 2]


def durable_save(obj, target):
    tmp = "%s.tmp.%d" % (target, os.getpid())
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    fd = os.open(os.path.dirname(os.path.abspath(target)), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def warm(target):
    with open(target, "rb") as f:
        while f.read(1 << 20):
            pass


save, load = [], []
for _ in range(reps):
    t0 = time.perf_counter()
    durable_save({"model": net.state_dict(), "optimizer": opt.state_dict()}, path)
    save.append((time.perf_counter() - t0) * 1e3)
    warm(path)
    t0 = time.perf_counter()
    ck = torch.load(path)
    net.load_state_dict(ck["model"])
    opt.load_state_dict(ck["optimizer"])
    load.append((time.perf_counter() - t0) * 1e3)
print("size-mb %.2f" % (os.path.getsize(path) / 1048576.0))
print("save-ms %.2f" % median(save))
print("load-ms %.2f" % median(load))
os.remove(path)
