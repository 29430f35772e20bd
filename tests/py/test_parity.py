#!/usr/bin/python3
"""Parity of training through the C API with python3-torch (Debian's, the
same LibTorch version): an MLP regression, and a small CNN with batch
normalisation built from the C API's layers (conv2d SAME, batch_norm, relu,
max_pool, flatten, fc, softmax cross-entropy), each trained 200 steps with
SGD + momentum and with Adam from the same initial values and data, and the
MLP with plain SGD and global-norm clipping (PyTorch's clip_grad_norm_, which
must match bit for bit, and TensorFlow's clip_by_global_norm). Every loss and
every final parameter (the batch-norm moving averages included) must agree
within 1e-5 (float32). The CNN also trains in bf16-mixed precision, equal to
python3-torch under torch.autocast and near the float32 run (see the
tolerances below). The reference is computed here,
independently, with torch.nn.functional on every run. Prints TAP.

usage: test_parity.py PATH/TO/parity_mlp PATH/TO/parity_cnn"""
import os
import subprocess
import sys
import tempfile
import traceback

import torch

PROGRAM = sys.argv[1]
PROGRAM_CNN = sys.argv[2]
N, D, H, STEPS, BATCH = 256, 8, 16, 200, 32
CNN_N, CNN_BATCH = 256, 16
TOL = 1e-5


def write(path, t):
    t.detach().contiguous().to(torch.float32).numpy().tofile(path)


def read(path, shape):
    import numpy
    return torch.from_numpy(numpy.fromfile(path, dtype=numpy.float32).reshape(shape))


def write_i64(path, t):
    t.detach().contiguous().to(torch.int64).numpy().tofile(path)


def reference(x, y, params, kind):
    w1, b1, w2, b2 = [p.clone().requires_grad_(True) for p in params]
    if kind == "sgd":
        opt = torch.optim.SGD([w1, b1, w2, b2], lr=0.05, momentum=0.9)
    elif kind.startswith("sgd_clip"):
        opt = torch.optim.SGD([w1, b1, w2, b2], lr=0.05)
    else:
        opt = torch.optim.Adam([w1, b1, w2, b2], lr=0.01)
    losses = []
    for step in range(STEPS):
        k = step % (N // BATCH)
        xb, yb = x[k * BATCH:(k + 1) * BATCH], y[k * BATCH:(k + 1) * BATCH]
        p = torch.nn.functional.linear(torch.relu(torch.nn.functional.linear(xb, w1, b1)), w2, b2)
        loss = torch.nn.functional.mse_loss(p, yb)
        opt.zero_grad()
        loss.backward()
        if kind == "sgd_clip":
            norm = torch.nn.utils.clip_grad_norm_([w1, b1, w2, b2], 0.1)
            assert step > 0 or norm > 0.1, "the first step's gradient norm %g does not clip" % norm
        elif kind == "sgd_clip_tf":  # tf.clip_by_global_norm, as tensorpack's GlobalNormClip
            grads = [w.grad for w in (w1, b1, w2, b2)]
            norm = torch.stack([(g * g).sum() for g in grads]).sum().sqrt()
            scale = torch.minimum(norm.reciprocal(), torch.tensor(1 / 0.1)) * 0.1
            for g in grads:
                g.mul_(scale)
        opt.step()
        losses.append(loss.item())
    return torch.tensor(losses), [w1.detach(), b1.detach(), w2.detach(), b2.detach()]


def mlp_run(kind, env=None, scales=False):
    """The MLP's data and initial values (seed 7), and parity_mlp's run of
    `kind` on them: (x, y, params, its losses, its final parameters, and
    with `scales` its loss scale after each step)."""
    torch.manual_seed(7)
    torch.set_num_threads(1)
    x = torch.randn(N, D)
    y = (x[:, :1] * 2 - x[:, 1:2] + 0.1 * torch.randn(N, 1))
    params = [torch.randn(H, D) * 0.3, torch.randn(H) * 0.1, torch.randn(1, H) * 0.3, torch.randn(1) * 0.1]
    with tempfile.TemporaryDirectory() as d:
        for name, t in zip(["x", "y", "w1", "b1", "w2", "b2"], [x, y] + params):
            write(os.path.join(d, name + ".bin"), t)
        with open(os.path.join(d, "dims.txt"), "w") as f:
            f.write("%d %d %d\n" % (N, D, H))
        p = subprocess.run([PROGRAM, d, kind, str(STEPS), str(BATCH)], capture_output=True, text=True, timeout=300,
                           env=env)
        if p.returncode != 0:
            raise AssertionError("parity_mlp failed: " + p.stderr[-2000:])
        got_losses = read(os.path.join(d, "losses.bin"), (STEPS,))
        got = [read(os.path.join(d, n + ".out"), t.shape) for n, t in zip(["w1", "b1", "w2", "b2"], params)]
        got_scales = read(os.path.join(d, "scales.bin"), (STEPS,)) if scales else None
    return x, y, params, got_losses, got, got_scales


def parity(kind):
    x, y, params, got_losses, got, _ = mlp_run(kind)
    want_losses, want = reference(x, y, params, kind)
    dl = (got_losses - want_losses).abs().max().item()
    dp = max((g - w).abs().max().item() for g, w in zip(got, want))
    print("# %s: max |loss diff| %.3g, max |param diff| %.3g, loss %.4f -> %.4f" %
          (kind, dl, dp, want_losses[0].item(), want_losses[-1].item()))
    assert want_losses[-1] < want_losses[0] * 0.5, "the reference did not train"
    # PyTorch's clip_grad_norm_ arithmetic is reproduced bit for bit
    tol = 0 if kind == "sgd_clip" else TOL
    assert dl <= tol, "losses differ by %g" % dl
    assert dp <= tol, "parameters differ by %g" % dp


class Skip(Exception):
    pass


OVERFLOW = [0, 5, 6, 40, 41, 42, 120]  # the steps whose cost is multiplied by 1e36


def grad_scaler_parity():
    """Adam with dynamic loss scaling (growth_interval 3) against PyTorch's own
    torch.amp.GradScaler("cpu") (PyTorch 2.3 and later; 1.13 has a CUDA-only
    one): the cost multiplied by 1e36 at the steps of OVERFLOW overflows the
    scaled gradients, GradScaler skips those optimizer steps and backs off.
    The scale after every step must be GradScaler's exactly; losses (relative)
    and parameters within 1e-5."""
    try:
        scaler = torch.amp.GradScaler("cpu", init_scale=65536.0, growth_factor=2.0, backoff_factor=0.5,
                                      growth_interval=3)
    except (AttributeError, TypeError, RuntimeError) as e:
        raise Skip("torch %s has no CPU GradScaler (%s)" % (torch.__version__, e))
    env = dict(os.environ, TPT_PARITY_OVERFLOW=",".join(map(str, OVERFLOW)))
    x, y, params, got_losses, got, got_scales = mlp_run("adam_scaled", env=env, scales=True)
    w1, b1, w2, b2 = [q.clone().requires_grad_(True) for q in params]
    opt = torch.optim.Adam([w1, b1, w2, b2], lr=0.01)
    losses, scales = [], []
    for step in range(STEPS):
        k = step % (N // BATCH)
        xb, yb = x[k * BATCH:(k + 1) * BATCH], y[k * BATCH:(k + 1) * BATCH]
        loss = torch.nn.functional.mse_loss(
            torch.nn.functional.linear(torch.relu(torch.nn.functional.linear(xb, w1, b1)), w2, b2), yb)
        if step in OVERFLOW:
            loss = loss * 1e36
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
        scales.append(scaler.get_scale())
    want_losses = torch.tensor(losses)
    want = [w1.detach(), b1.detach(), w2.detach(), b2.detach()]
    bad = [(s, a, b) for s, (a, b) in enumerate(zip(got_scales.tolist(), scales)) if a != b]
    assert not bad, "the scale differs from GradScaler's at %d steps, first (step, ours, GradScaler's) %s" % (
        len(bad), bad[0])
    dl = ((got_losses.double() - want_losses.double()).abs() / want_losses.double().abs().clamp(min=1)).max().item()
    dp = max((g - w).abs().max().item() for g, w in zip(got, want))
    print("# adam with loss scaling vs torch.amp.GradScaler: scales equal at all %d steps (last %g), "
          "max relative loss diff %.3g, max |param diff| %.3g" % (STEPS, scales[-1], dl, dp))
    assert dl <= TOL, "losses differ by %g" % dl
    assert dp <= TOL, "parameters differ by %g" % dp


CNN_PARAMS = ["conv_W", "conv_b", "bn_gamma", "bn_beta", "fc_W", "fc_b"]
CNN_STATE = ["bn_mean_EMA", "bn_variance_EMA"]


def cnn_reference(x, y, params, kind, bf16=False, channels_last=False):
    """conv2d 3x3 (padding 1) -> batch_norm -> relu -> max_pool2d 2 -> linear
    -> cross_entropy, with torch.nn.functional; with bf16 the forward pass and
    the loss under torch.autocast("cpu", dtype=torch.bfloat16), as a PyTorch
    user writes mixed precision by hand; with channels_last the convolution's
    weight and images in channels-last memory format, as
    Module.to(memory_format=torch.channels_last) and Tensor.to(...) make
    them (restrided even with one channel)."""
    F = torch.nn.functional
    cw, cb, gamma, beta, fw, fb = [p.clone().requires_grad_(True) for p in params]
    if channels_last:
        cw = params[0].clone(memory_format=torch.channels_last).requires_grad_(True)
    running_mean, running_var = torch.zeros(4), torch.ones(4)
    trainable = [cw, cb, gamma, beta, fw, fb]
    if kind == "sgd":
        opt = torch.optim.SGD(trainable, lr=0.05, momentum=0.9)
    else:
        opt = torch.optim.Adam(trainable, lr=0.01, eps=1e-3)
    losses = []
    for step in range(STEPS):
        k = step % (CNN_N // CNN_BATCH)
        xb, yb = x[k * CNN_BATCH:(k + 1) * CNN_BATCH], y[k * CNN_BATCH:(k + 1) * CNN_BATCH]
        if channels_last:
            xb = xb.to(memory_format=torch.channels_last)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            h = F.conv2d(xb, cw, cb, padding=1)
            h = F.batch_norm(h, running_mean, running_var, gamma, beta, training=True, momentum=0.1, eps=1e-5)
            h = F.max_pool2d(F.relu(h), 2)
            logits = F.linear(h.flatten(1), fw, fb)
            loss = F.cross_entropy(logits, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return torch.tensor(losses), [p.detach() for p in trainable] + [running_mean, running_var]


def cnn_run(kind, x, y, params, env=None):
    """The C program's losses and final variables for `kind` (`env`: more
    environment variables)."""
    with tempfile.TemporaryDirectory() as d:
        write(os.path.join(d, "x.bin"), x)
        write_i64(os.path.join(d, "y.bin"), y)
        for name, t in zip(CNN_PARAMS, params):
            write(os.path.join(d, name + ".bin"), t)
        with open(os.path.join(d, "dims.txt"), "w") as f:
            f.write("%d\n" % CNN_N)
        p = subprocess.run([PROGRAM_CNN, d, kind, str(STEPS), str(CNN_BATCH)], capture_output=True, text=True,
                           timeout=300, env=dict(os.environ, **(env or {})))
        if p.returncode != 0:
            raise AssertionError("parity_cnn failed: " + p.stderr[-2000:])
        got_losses = read(os.path.join(d, "losses.bin"), (STEPS,))
        shapes = [t.shape for t in params] + [(4,), (4,)]
        return got_losses, [read(os.path.join(d, n + ".out"), s) for n, s in zip(CNN_PARAMS + CNN_STATE, shapes)]


def cnn_data():
    """The CNN's images, labels and initial values (seed 11)."""
    torch.manual_seed(11)
    torch.set_num_threads(1)
    x = torch.randn(CNN_N, 1, 8, 8)
    # three classes: which quadrant (top-left, bottom-right, top-right) has the largest sum
    quads = torch.stack([x[:, 0, :4, :4].sum((1, 2)), x[:, 0, 4:, 4:].sum((1, 2)), x[:, 0, :4, 4:].sum((1, 2))], 1)
    params = [torch.randn(4, 1, 3, 3) * 0.3, torch.randn(4) * 0.1, 1 + 0.1 * torch.randn(4), 0.1 * torch.randn(4),
              torch.randn(3, 64) * 0.1, torch.randn(3) * 0.1]
    return x, quads.argmax(1), params


# bfloat16 keeps 8 bits of mantissa: one rounding is a relative error of up
# to 2^-9 = 0.2 %. Step by step the bf16 and float32 runs start within
# BF16_EARLY_TOL of each other (measured: 0.008 at most over the first 20
# steps); after that SGD with momentum on batches of 16 carries the
# differences on and the two trajectories part (the final parameters differ
# by 20 %), so training as a whole is compared: the mean loss over the 200
# steps (measured: 1.2 % apart).
BF16_VS_PYTHON_TOL = 1e-5
BF16_EARLY_STEPS, BF16_EARLY_TOL = 20, 0.02
BF16_MEAN_LOSS_REL_TOL = 0.05


def cnn_bf16_parity():
    """TPT_PRECISION_BF16_MIXED against python3-torch's torch.autocast on the
    same network, data and initial values: the same LibTorch's autocast
    policy and kernels. In both memory formats (the library picks one by
    itself; bfloat16's rounding differs between the two formats' kernels,
    so each is held against python3-torch in the same format)."""
    x, y, params = cnn_data()
    for layout, env in (("NCHW", "0"), ("channels-last", "1")):
        got_losses, got = cnn_run("sgd_bf16", x, y, params, env={"TPTRAIN_CHANNELS_LAST": env})
        want_losses, want = cnn_reference(x, y, params, "sgd", bf16=True, channels_last=env == "1")
        dl = (got_losses - want_losses).abs().max().item()
        diffs = [(g - w).abs().max().item() for g, w in zip(got, want)]
        print("# cnn sgd bf16 vs torch.autocast, %s: max |loss diff| %.3g, max |param diff| %.3g, loss %.4f -> %.4f" %
              (layout, dl, max(diffs), want_losses[0].item(), want_losses[-1].item()))
        assert want_losses[-10:].mean() < want_losses[:10].mean() * 0.7, "the reference did not train"
        assert dl <= BF16_VS_PYTHON_TOL, "%s: losses differ by %g" % (layout, dl)
        assert max(diffs) <= BF16_VS_PYTHON_TOL, "%s: parameters differ by %g" % (layout, max(diffs))


def cnn_bf16_near_fp32():
    """The same training in bf16-mixed and in float32 (python3-torch's, which
    the fp32 parity tests hold equal to ours): near, and not equal (autocast
    is on)."""
    x, y, params = cnn_data()
    got_losses, _ = cnn_run("sgd_bf16", x, y, params)
    fp32_losses, _ = cnn_reference(x, y, params, "sgd")
    dl = (got_losses - fp32_losses).abs()
    early = dl[:BF16_EARLY_STEPS].max().item()
    rel = abs(got_losses.mean().item() - fp32_losses.mean().item()) / fp32_losses.mean().item()
    print("# cnn sgd bf16 vs fp32: max |loss diff| over the first %d steps %.3g; mean loss %.4f vs %.4f (%.2g apart)" %
          (BF16_EARLY_STEPS, early, got_losses.mean().item(), fp32_losses.mean().item(), rel))
    assert dl.max().item() > 1e-4, "bf16-mixed computed the float32 losses: autocast was not on"
    assert early <= BF16_EARLY_TOL, "the first steps' losses differ by %g" % early
    assert rel <= BF16_MEAN_LOSS_REL_TOL, "the mean losses are %g apart" % rel
    assert got_losses[-10:].mean() < got_losses[:10].mean() * 0.7, "bf16-mixed did not train"


def cnn_channels_last(kind):
    """The convolutions in channels-last memory format (forced: the library
    picks it by itself only where it is faster, docs/trainer.md) against
    python3-torch's NCHW float32 training: equal within float32 rounding."""
    x, y, params = cnn_data()
    got_losses, got = cnn_run(kind, x, y, params, env={"TPTRAIN_CHANNELS_LAST": "1"})
    want_losses, want = cnn_reference(x, y, params, kind)
    dl = (got_losses - want_losses).abs().max().item()
    dp = max((g - w).abs().max().item() for g, w in zip(got, want))
    print("# cnn %s channels-last vs NCHW: max |loss diff| %.3g, max |param diff| %.3g" % (kind, dl, dp))
    assert dl <= TOL, "losses differ by %g" % dl
    assert dp <= TOL, "parameters differ by %g" % dp


def cnn_parity(kind):
    x, y, params = cnn_data()
    # Adam with eps 1e-3: the conv bias before batch normalisation has a
    # gradient of zero plus rounding noise, which Adam's default eps (1e-8)
    # turns into full steps of either sign; one ulp of difference anywhere
    # (with 2.6, python3-torch's Adam step and ours round differently: the
    # MLP's losses differ by 5e-7) then moves conv_b and the moving mean
    # by the learning rate.
    got_losses, got = cnn_run("adam_eps" if kind == "adam" else kind, x, y, params)
    want_losses, want = cnn_reference(x, y, params, kind)
    dl = (got_losses - want_losses).abs().max().item()
    diffs = [(g - w).abs().max().item() for g, w in zip(got, want)]
    dp = max(diffs)
    print("# cnn %s: max |loss diff| %.3g, max |param diff| %.3g (bn EMA mean %.3g, variance %.3g), loss %.4f -> %.4f" %
          (kind, dl, dp, diffs[6], diffs[7], want_losses[0].item(), want_losses[-1].item()))
    assert want_losses[-10:].mean() < want_losses[:10].mean() * 0.7, "the reference did not train"
    assert (want[7] - 1).abs().max() > 0.01, "the moving variance did not move"
    assert dl <= TOL, "losses differ by %g" % dl
    assert dp <= TOL, "parameters differ by %g (%s)" % (dp, ", ".join(
        "%s %.3g" % (n, v) for n, v in zip(CNN_PARAMS + CNN_STATE, diffs)))


def main():
    tests = [("mlp_sgd_momentum_matches_python_torch", lambda: parity("sgd")),
             ("mlp_adam_matches_python_torch", lambda: parity("adam")),
             ("mlp_sgd_clip_grad_norm_bit_for_bit", lambda: parity("sgd_clip")),
             ("mlp_sgd_clip_by_global_norm_tf", lambda: parity("sgd_clip_tf")),
             ("mlp_adam_loss_scaling_matches_torch_grad_scaler", grad_scaler_parity),
             ("cnn_bn_sgd_momentum", lambda: cnn_parity("sgd")),
             ("cnn_bn_adam", lambda: cnn_parity("adam")),
             ("cnn_bn_sgd_bf16_mixed_matches_torch_autocast", cnn_bf16_parity),
             ("cnn_bn_sgd_bf16_mixed_near_fp32", cnn_bf16_near_fp32),
             ("cnn_bn_sgd_channels_last_equals_nchw", lambda: cnn_channels_last("sgd"))]
    print("TAP version 13")
    print("1..%d" % len(tests))
    failed = 0
    for i, (name, fn) in enumerate(tests, 1):
        try:
            fn()
            print("ok %d - %s" % (i, name))
        except Skip as e:
            print("ok %d - %s # SKIP %s" % (i, name, e))
        except Exception:
            failed += 1
            print("not ok %d - %s" % (i, name))
            for line in traceback.format_exc().splitlines():
                print("# " + line)
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
