#!/usr/bin/python3
"""dist-scaling's baseline: PyTorch DDP (python3-torch, Gloo, processes
started with torch.multiprocessing and a tcp:// init method) training
towers-scaling's CNN on zeros, one intra-op thread per process, BATCH per
process. Prints `images/s X` (the job's, over STEPS steps after 10 warm-up
steps).

usage: dist_scaling.py STEPS BATCH WORLD"""
import os
import socket
import sys
import time

import torch
import torch.multiprocessing as mp

# PyTorch 2.4+ opens tcp:// stores with libuv unless told not to; Debian's
# python3-torch is built without it (1.13 ignores the variable).
os.environ["USE_LIBUV"] = "0"

WARMUP = 10


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv0 = torch.nn.Conv2d(1, 32, 5, padding=2)
        self.conv1 = torch.nn.Conv2d(32, 64, 3, padding=1)
        self.fc = torch.nn.Linear(64 * 7 * 7, 10)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv0(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        return self.fc(x.flatten(1))


def worker(rank, world, port, steps, batch, result):
    import torch.distributed as dist
    torch.set_num_threads(1)
    torch.manual_seed(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    model = torch.nn.parallel.DistributedDataParallel(CNN())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.zeros(batch, 1, 28, 28), torch.zeros(batch, dtype=torch.long)
    for step in range(WARMUP + steps):
        if step == WARMUP:
            start = time.monotonic()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    took = time.monotonic() - start
    if rank == 0:
        result.put(steps * batch * world / took)
    dist.destroy_process_group()


def main():
    steps, batch, world = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    result = ctx.SimpleQueue()
    mp.start_processes(worker, args=(world, port, steps, batch, result), nprocs=world, join=True, start_method="fork")
    print("images/s %.1f" % result.get())


if __name__ == "__main__":
    main()
