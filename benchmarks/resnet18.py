"""PyTorch's side of benchmark resnet18 (tools/gpu_check --speed is tptrain's):
a ResNet-18-sized CNN in its CIFAR form (3x3 stem conv of 64, no max pool, 4
stages of 2 basic blocks of 64, 128, 256, 512 channels, strides 1, 2, 2, 2, a
1x1 conv + batch norm on the shortcut where the shape changes, global average
pool, fc 10; 11.2M variables), batch norm after every conv, trained with SGD
(lr 0.01, momentum 0.9) on random 3x32x32 images (uniform in [-1, 1), not
zeros) and random labels, 4 batches of data already on the device, taken in
order, as a PyTorch user writes it. A warm-up epoch, then REPEATS epochs of
STEPS steps, each timed with the device synchronised before and after;
prints each epoch's ms/step and the median.

usage: resnet18.py [--device DEV] [--batch 256] [--steps 20] [--repeats 5]"""
import argparse
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (x if self.shortcut is None else self.shortcut(x)))


class ResNet18(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
        blocks, cin = [], 64
        for i, width in enumerate((64, 128, 256, 512)):
            for b in range(2):
                blocks.append(Block(cin, width, 2 if i > 0 and b == 0 else 1))
                cin = width
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        return self.fc(self.blocks(self.stem(x)).mean((2, 3)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    torch.manual_seed(1)
    x = torch.rand(4 * a.batch, 3, 32, 32, device=dev) * 2 - 1
    y = torch.randint(0, 10, (4 * a.batch,), device=dev)
    net = ResNet18().to(dev).train()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    print("resnet18.py: %d values in its variables" % sum(p.numel() for p in net.parameters()))
    step, times = 0, []
    for epoch in range(1 + a.repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            i = (step % 4) * a.batch
            loss = F.cross_entropy(net(x[i:i + a.batch]), y[i:i + a.batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
        sync()
        times.append(1e3 * (time.perf_counter() - t0) / a.steps)
    print("resnet18 on %s, batch %d, %d steps an epoch; ms/step of each epoch (the first warms up): %s" % (
        a.device, a.batch, a.steps, " ".join("%.2f" % t for t in times)))
    ms = statistics.median(times[1:])
    print("resnet18 ms/step: %.3f (median of %d epochs), images/s: %.1f" % (ms, a.repeats, 1e3 * a.batch / ms))


if __name__ == "__main__":
    main()
