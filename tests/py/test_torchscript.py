#!/usr/bin/python3
"""TorchScript models through the C API, against python3-torch: a module
scripted and saved here (a small MLP with a LayerNorm, returning
(cost, {"prediction": ...})) is trained 200 steps by the C program with
SGD + momentum and with Adam, and by PyTorch from the same file; losses agree
within 1e-5, and the module the C program saved loads in PyTorch with the
same final parameters (within 1e-5). The same again for a module compiled
from TorchScript source: PyTorch compiles SOURCE (ScriptModule.define), the C
program compiles the same text (tpt_model_from_torchscript_source) and starts
from PyTorch's initial values. Prints TAP.

usage: test_torchscript.py PATH/TO/parity_torchscript"""
import os
import subprocess
import sys
import tempfile
import traceback
from typing import Dict, Tuple

import torch

PROGRAM = sys.argv[1]
N, D, STEPS, BATCH = 128, 5, 200, 16
TOL = 1e-5


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(D, 12)
        self.norm = torch.nn.LayerNorm(12)
        self.fc2 = torch.nn.Linear(12, 1)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        p = self.fc2(torch.relu(self.norm(self.fc1(x))))
        return torch.nn.functional.mse_loss(p, y), {"prediction": p}


# The module compiled from source, by both sides: a LayerNorm from its
# functional form and a buffer (model-only) `scale`. (One method: PyTorch
# 1.13's legacy ScriptModule.define mishandles helper methods; the C tests
# cover those.)
SOURCE = """
def forward(self, x, y):
    h = torch.matmul(x, self.W1.t()) + self.b1
    h = torch.relu(torch.layer_norm(h, [12], self.gamma, self.beta, 1e-5))
    p = (torch.matmul(h, self.W2.t()) + self.b2) * self.scale
    return torch.mean((p - y) * (p - y)), {"prediction": p}
"""


class SourceNet(torch.jit.ScriptModule):
    def __init__(self):
        super().__init__()
        self.W1 = torch.nn.Parameter(torch.randn(12, D) * 0.4)
        self.b1 = torch.nn.Parameter(torch.randn(12) * 0.1)
        self.gamma = torch.nn.Parameter(torch.ones(12))
        self.beta = torch.nn.Parameter(torch.zeros(12))
        self.W2 = torch.nn.Parameter(torch.randn(1, 12) * 0.3)
        self.b2 = torch.nn.Parameter(torch.zeros(1))
        self.register_buffer("scale", torch.full((1,), 1.5))
        self.define(SOURCE)


def write_source(d, module):
    """source.py, params.txt and init_NAME.bin for the C program."""
    with open(os.path.join(d, "source.py"), "w") as f:
        f.write(SOURCE)
    with open(os.path.join(d, "params.txt"), "w") as f:
        for trainable, named in ((1, module.named_parameters()), (0, module.named_buffers())):
            for name, value in named:
                f.write("%s %d %d %s\n" % (name, trainable, value.dim(), " ".join(str(n) for n in value.shape)))
                value.detach().numpy().tofile(os.path.join(d, "init_%s.bin" % name))


def run(kind, source=False):
    torch.manual_seed(3)
    torch.set_num_threads(1)
    x = torch.randn(N, D)
    y = x[:, :1] - 0.5 * x[:, 2:3] + 0.05 * torch.randn(N, 1)
    with tempfile.TemporaryDirectory() as d:
        if source:
            ref = SourceNet()
            write_source(d, ref)
        else:
            torch.jit.save(torch.jit.script(Net()), os.path.join(d, "model.pt"))
        x.numpy().tofile(os.path.join(d, "x.bin"))
        y.numpy().tofile(os.path.join(d, "y.bin"))
        with open(os.path.join(d, "dims.txt"), "w") as f:
            f.write("%d %d\n" % (N, D))
        p = subprocess.run([PROGRAM, d, kind, str(STEPS), str(BATCH)], capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise AssertionError("parity_torchscript failed: " + p.stderr[-2000:])
        import numpy
        got_losses = torch.from_numpy(numpy.fromfile(os.path.join(d, "losses.bin"), dtype=numpy.float32))
        trained = torch.jit.load(os.path.join(d, "trained.pt"))
        if not source:
            ref = torch.jit.load(os.path.join(d, "model.pt"))
    ref.train()
    params = list(ref.parameters())
    opt = (torch.optim.SGD(params, lr=0.05, momentum=0.9) if kind == "sgd" else torch.optim.Adam(params, lr=0.01))
    losses = []
    # op by op, as tptrain runs a TorchScript module (no profiling or fusion:
    # a LibTorch with LLVM, Debian 13's, would compile fused kernels for minutes)
    with torch.jit.optimized_execution(False):
        for step in range(STEPS):
            k = step % (N // BATCH)
            loss, _ = ref(x[k * BATCH:(k + 1) * BATCH], y[k * BATCH:(k + 1) * BATCH])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    want = torch.tensor(losses)
    dl = (got_losses - want).abs().max().item()
    ref_params = dict(ref.named_parameters())
    assert sorted(n for n, _ in trained.named_parameters()) == sorted(ref_params)
    dp = max((p - ref_params[n]).abs().max().item() for n, p in trained.named_parameters())
    ref_buffers = dict(ref.named_buffers())
    assert sorted(n for n, _ in trained.named_buffers()) == sorted(ref_buffers)
    assert all(torch.equal(b, ref_buffers[n]) for n, b in trained.named_buffers())
    print("# %s%s: max |loss diff| %.3g, max |param diff| %.3g, loss %.4f -> %.4f" %
          (kind, " (from source)" if source else "", dl, dp, want[0], want[-1]))
    assert len(got_losses) == STEPS
    assert want[-1] < want[0] * 0.5, "the reference did not train"
    assert dl <= TOL and dp <= TOL


def main():
    tests = [("torchscript_sgd_momentum_matches_python_torch", lambda: run("sgd")),
             ("torchscript_adam_matches_python_torch", lambda: run("adam")),
             ("torchscript_source_sgd_momentum_matches_python_torch", lambda: run("sgd", source=True)),
             ("torchscript_source_adam_matches_python_torch", lambda: run("adam", source=True))]
    print("TAP version 13")
    print("1..%d" % len(tests))
    failed = 0
    for i, (name, fn) in enumerate(tests, 1):
        try:
            fn()
            print("ok %d - %s" % (i, name))
        except Exception:
            failed += 1
            print("not ok %d - %s" % (i, name))
            for line in traceback.format_exc().splitlines():
                print("# " + line)
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
