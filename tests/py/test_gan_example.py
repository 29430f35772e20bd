#!/usr/bin/env python3
"""The DCGAN example (examples/c/gan.c) on Fashion-MNIST, shortened to
STEPS steps per epoch for 2 epochs, and what it leaves: a PNG grid of
samples per epoch that is not constant, whose samples differ from one
another and from the other epoch's, both losses moving in stats.json, a
checkpoint holding both nets and both train ops' optimizers; then a run on
the same directory resumes from it. Prints TAP. Standard library only (the
PNGs are decoded here with zlib).

usage: test_gan_example.py PATH/TO/gan [STEPS] [TOWERS]"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

GAN = sys.argv[1]
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 25
TOWERS = sys.argv[3] if len(sys.argv) > 3 else None
DATA = "/usr/share/datasets/fashion-mnist"


def read_png(path):
    """(width, height, channels, bytes) of an 8-bit, unfiltered PNG, as
    tptrain writes them."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        crc, = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert crc == zlib.crc32(kind + body) & 0xffffffff, "bad CRC in " + kind.decode()
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, color = ihdr[:4]
    assert depth == 8, "depth %d" % depth
    c = {0: 1, 2: 3, 6: 4}[color]
    raw = zlib.decompress(idat)
    rows = []
    for y in range(h):
        line = raw[y * (w * c + 1):(y + 1) * (w * c + 1)]
        assert line[0] == 0, "filter %d" % line[0]
        rows.append(line[1:])
    return w, h, c, b"".join(rows)


def cells(w, h, px, size=28, pad=2, cols=8):
    """The grid's samples, each as bytes."""
    out = []
    for r in range((h - pad) // (size + pad)):
        for c in range(cols):
            y0, x0 = pad + r * (size + pad), pad + c * (size + pad)
            out.append(bytes(px[(y0 + y) * w + x0 + x] for y in range(size) for x in range(size)))
    return out


def std(values):
    m = sum(values) / len(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / len(values))


def main():
    print("TAP version 13")
    if not os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte.gz")) and \
       not os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte")):
        print("1..0 # SKIP no Fashion-MNIST under " + DATA)
        return 0
    tmp = tempfile.mkdtemp(prefix="tpt_gan_")
    failed = 0
    n = 0

    def check(name, fn):
        nonlocal failed, n
        n += 1
        try:
            fn()
            print("ok %d - %s" % (n, name))
        except Exception as e:  # noqa: BLE001 (a failed check of any kind)
            failed += 1
            print("not ok %d - %s" % (n, name))
            for line in str(e).splitlines() or ["(no message)"]:
                print("#   " + line)

    logdir = os.path.join(tmp, "gan")
    args = [GAN, "--steps", str(STEPS)] + (["--towers", TOWERS] if TOWERS else []) + [logdir, DATA, "2"]
    run = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
    out = run.stdout.decode(errors="replace")

    def trained():
        assert run.returncode == 0, "exit %d:\n%s" % (run.returncode, out[-3000:])
        assert "after %d steps" % (2 * STEPS) in out, out[-2000:]
    check("2 epochs of %d steps%s" % (STEPS, " on %s towers" % TOWERS if TOWERS else ""), trained)

    grids = {}

    def samples():
        for e in (1, 2):
            w, h, c, px = read_png(os.path.join(logdir, "samples-epoch%d.png" % e))
            assert (w, h, c) == (8 * 30 + 2, 8 * 30 + 2, 1), (w, h, c)
            grids[e] = (w, h, px)
            got = cells(w, h, px)
            assert len(got) == 64
            s = std(list(got[0]) + list(got[17]))
            assert s > 5, "epoch %d: the samples are flat (std %.2f)" % (e, s)
            distinct = len(set(got))
            assert distinct >= 32, "epoch %d: only %d distinct samples of 64" % (e, distinct)
    check("a grid of 64 samples per epoch, not constant, the samples distinct", samples)

    def epochs_differ():
        a, b = grids[1][2], grids[2][2]
        changed = sum(1 for x, y in zip(a, b) if abs(x - y) > 8)
        assert changed > len(a) // 20, "only %d of %d pixels changed between epochs" % (changed, len(a))
    check("the samples change between the epochs", epochs_differ)

    def losses():
        with open(os.path.join(logdir, "stats.json")) as f:
            stats = json.load(f)
        epochs = [s for s in stats if "g_loss" in s and "d_loss" in s]
        assert len(epochs) >= 2, stats
        for name in ("g_loss", "d_loss"):
            v = [s[name] for s in epochs]
            assert all(math.isfinite(x) for x in v), (name, v)
            assert abs(v[-1] - v[0]) > 1e-4, "%s did not move: %r" % (name, v)
            # at the start both are about ln 2 (D cannot tell yet)
            assert max(abs(x - math.log(2)) for x in v) > 0.01, "%s stayed at ln 2: %r" % (name, v)
    check("both losses leave their initial values", losses)

    def checkpoint():
        with open(os.path.join(logdir, "checkpoint")) as f:
            index = f.read()
        assert "model-%d" % (2 * STEPS) in index, index
        size = os.path.getsize(os.path.join(logdir, "model-%d" % (2 * STEPS)))
        with open(os.path.join(logdir, "model-%d" % (2 * STEPS)), "rb") as f:
            blob = f.read()
        for name in (b"gen/fc0/W", b"discrim/fc/W", b"train_ops", b"g_op", b"d_op"):
            assert name in blob, "%s not in the checkpoint (%d bytes)" % (name.decode(), size)
    check("the checkpoint holds both nets and both ops' optimizers", checkpoint)

    def resumes():
        more = subprocess.run(args[:-1] + ["3"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
        text = more.stdout.decode(errors="replace")
        assert more.returncode == 0, text[-3000:]
        assert "after %d steps" % (3 * STEPS) in text, text[-2000:]
        assert os.path.exists(os.path.join(logdir, "samples-epoch3.png"))
    check("a second run on the directory goes on with epoch 3", resumes)

    print("1..%d" % n)
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
