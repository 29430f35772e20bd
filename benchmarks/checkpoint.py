"""Baseline of benchmark checkpoint: the same MLP and Adam state in
python3-torch, saved with torch.save({"model": ..., "optimizer": ...}) followed
by flush and os.fsync (what a careful user does; tptrain's save is atomic and
fsync'ed), and loaded with torch.load + load_state_dict. Medians of REPS.

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


save, load = [], []
for _ in range(reps):
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        torch.save({"model": net.state_dict(), "optimizer": opt.state_dict()}, f)
        f.flush()
        os.fsync(f.fileno())
    save.append((time.perf_counter() - t0) * 1e3)
    t0 = time.perf_counter()
    ck = torch.load(path)
    net.load_state_dict(ck["model"])
    opt.load_state_dict(ck["optimizer"])
    load.append((time.perf_counter() - t0) * 1e3)
print("size-mb %.2f" % (os.path.getsize(path) / 1048576.0))
print("save-ms %.2f" % median(save))
print("load-ms %.2f" % median(load))
os.remove(path)
