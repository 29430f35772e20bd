#!/usr/bin/python3
"""Parity of the GAN trainers (issue 16) with python3-torch: a small GAN (MLP
generator and discriminator, tensorpack's GANModelDesc losses) trained 20
steps through the C API (tests/c/parity_gan.c) and, from the same initial
values and data, by the same alternation written by hand with
torch.autograd: GANTrainer (one forward pass, both gradients, G's update
then D's) with SGD + momentum and with Adam, each op with an optimizer of
its own; and SeparateGANTrainer with d_period 3 (D's run when global_step %
3 == 0, then G's; every run takes the next batch). Every parameter must
agree within 1e-5. Prints TAP.

usage: test_gan_parity.py PATH/TO/parity_gan"""
import os
import subprocess
import sys
import tempfile
import traceback

import torch

PROGRAM = sys.argv[1]
N, X, Z, H, STEPS, BATCH = 128, 3, 2, 8, 20, 16
TOL = 1e-5
FILES = ["gen_fc0_W", "gen_fc0_b", "gen_fc1_W", "gen_fc1_b", "discrim_fc0_W", "discrim_fc0_b", "discrim_fc1_W",
         "discrim_fc1_b"]


def read(path, shape):
    import numpy
    return torch.from_numpy(numpy.fromfile(path, dtype=numpy.float32).reshape(shape))


def reference(real, z, params, kind, periods):
    F = torch.nn.functional
    ps = [p.clone().requires_grad_(True) for p in params]
    g_params, d_params = ps[:4], ps[4:]

    def make(group):
        if kind == "sgd":
            return torch.optim.SGD(group, lr=0.05, momentum=0.9)
        return torch.optim.Adam(group, lr=0.01)

    opt_g, opt_d = make(g_params), make(d_params)
    batches = N // BATCH
    runs = [0]

    def mlp(x, w0, b0, w1, b1):
        return F.linear(torch.relu(F.linear(x, w0, b0)), w1, b1)

    def run(ops):  # one hooked run: a forward pass on the next batch, the ops' gradients, then their updates
        k = runs[0] % batches
        runs[0] += 1
        xr, zb = real[k * BATCH:(k + 1) * BATCH], z[k * BATCH:(k + 1) * BATCH]
        fake = mlp(zb, *g_params)
        d_real, d_fake = mlp(xr, *d_params), mlp(fake, *d_params)
        ones, zeros = torch.ones_like(d_real), torch.zeros_like(d_real)
        d_loss = 0.5 * (F.binary_cross_entropy_with_logits(d_real, ones) +
                        F.binary_cross_entropy_with_logits(d_fake, zeros))
        g_loss = F.binary_cross_entropy_with_logits(d_fake, ones)
        grads = []
        for i, op in enumerate(ops):
            cost, group = (g_loss, g_params) if op == "g" else (d_loss, d_params)
            grads.append(torch.autograd.grad(cost, group, retain_graph=i + 1 < len(ops)))
        for op, gs in zip(ops, grads):
            group, opt = (g_params, opt_g) if op == "g" else (d_params, opt_d)
            for p, g in zip(group, gs):
                p.grad = g
            opt.step()

    gs = 0
    for step in range(STEPS):
        if periods is None:
            run(["g", "d"])  # GANTrainer: G's update, then D's (one hooked run)
            gs += 1
        else:  # SeparateGANTrainer.run_step
            dp, gp = periods
            if gs % dp == 0:
                run(["d"])
                gs += 1
            if gs % gp == 0:
                run(["g"])
                gs += 1
    return [p.detach() for p in ps]


def parity(kind, periods=None):
    torch.manual_seed(5)
    torch.set_num_threads(1)
    real = torch.randn(N, X) * 0.5 + torch.tensor([1.0, -1.0, 0.5])
    z = torch.rand(N, Z) * 2 - 1
    params = [torch.randn(H, Z) * 0.5, torch.randn(H) * 0.1, torch.randn(X, H) * 0.5, torch.randn(X) * 0.1,
              torch.randn(H, X) * 0.5, torch.randn(H) * 0.1, torch.randn(1, H) * 0.5, torch.randn(1) * 0.1]
    with tempfile.TemporaryDirectory() as d:
        for name, t in zip(["real", "z"] + FILES, [real, z] + params):
            t.contiguous().numpy().tofile(os.path.join(d, name + ".bin"))
        with open(os.path.join(d, "dims.txt"), "w") as f:
            f.write("%d %d %d %d\n" % (N, X, Z, H))
        cmd = [PROGRAM, d, kind, str(STEPS), str(BATCH)] + ([str(periods[0]), str(periods[1])] if periods else [])
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise AssertionError("parity_gan failed: " + p.stderr[-2000:])
        got = [read(os.path.join(d, n + ".out"), t.shape) for n, t in zip(FILES, params)]
    want = reference(real, z, params, kind, periods)
    diffs = [(g - w).abs().max().item() for g, w in zip(got, want)]
    moved = min((w - p).abs().max().item() for w, p in zip(want, params))
    print("# %s %s: max |param diff| %.3g; every parameter moved by at least %.3g" %
          (kind, "GANTrainer" if periods is None else "SeparateGANTrainer%s" % (periods,), max(diffs), moved))
    assert moved > 1e-3, "a parameter did not train"
    assert max(diffs) <= TOL, "parameters differ: " + ", ".join("%s %.3g" % (n, v) for n, v in zip(FILES, diffs))


def main():
    tests = [("gan_trainer_sgd_momentum", lambda: parity("sgd")),
             ("gan_trainer_adam", lambda: parity("adam")),
             ("separate_gan_trainer_d_period_3", lambda: parity("adam", (3, 1))),
             ("separate_gan_trainer_g_period_2", lambda: parity("sgd", (1, 2)))]
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
