#!/usr/bin/python3
"""The mlp-step baseline in python3-torch: the same MLP, data and optimizer as
benchmarks/mlp_step.cpp, one thread. Prints "python <steps/s>"."""
import sys
import time

import torch

B, IN, H, ROWS = 64, 32, 64, 64 * 16
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
torch.set_num_threads(1)
x, y = torch.randn(ROWS, IN), torch.randn(ROWS, 1)
best = 0.0
for r in range(5):
    params = [(torch.randn(*s) * 0.1).requires_grad_(True) for s in [(H, IN), (H,), (H, H), (H,), (1, H), (1,)]]
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    t0 = time.perf_counter()
    for s in range(steps):
        k = s % (ROWS // B)
        xb, yb = x[k * B:(k + 1) * B], y[k * B:(k + 1) * B]
        h = torch.relu(torch.nn.functional.linear(xb, params[0], params[1]))
        h = torch.relu(torch.nn.functional.linear(h, params[2], params[3]))
        loss = torch.nn.functional.mse_loss(torch.nn.functional.linear(h, params[4], params[5]), yb)
        loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    best = max(best, steps / (time.perf_counter() - t0))
print("python %.1f" % best)
