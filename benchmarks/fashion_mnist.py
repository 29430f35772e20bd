"""The python3-torch side of benchmark fashion-mnist: the network, data and
schedule of examples/c/fashion_mnist.c (tensorpack's mnist-convnet recipe)
written as a PyTorch user would, with the data in memory (no loader
threads): conv 5x5 32 -> max pool 2 -> conv 3x3 32 -> conv 3x3 32 -> max
pool 2 -> conv 3x3 32 -> fc 512 -> dropout 0.5 -> fc 10, ReLU after each conv
and fc0, SAME padding, softmax cross-entropy, Adam 1e-3 (times 0.6 after each
epoch from the second), batches of 128 shuffled each epoch, images scaled to
[-1, 1]; after each epoch the accuracy on the 10,000 test images.

With --bf16, the best a PyTorch user does by hand on a CPU: the forward pass
and the loss under torch.autocast("cpu", dtype=torch.bfloat16), the model and
the images in channels-last memory format (the images restrided with
.to(memory_format=), as .contiguous(memory_format=) leaves a one-channel
batch NCHW-strided), and torch.set_num_threads with one thread per CPU the
process may use (LibTorch 1.13's default is half the logical CPUs on x86-64:
one thread on a 2-core machine without hyperthreads). Without it, as a user
runs it: LibTorch's default threads and layout.

With --device DEV ("cuda:0"): the network and the data (train and test
images and labels, already normalised) on that device, each epoch's order
drawn there, as a PyTorch user with a GPU writes it; the epoch time is taken
with the device synchronised.

usage: fashion_mnist.py [--bf16] [--device DEV] EPOCHS [DIR]
prints, per epoch, the trainer's line: "Epoch N (global_step G) finished, time: S sec."
(training steps only, as tptrain times them), then the test accuracy."""
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def load(d, split):
    with gzip.open("%s/%s-images-idx3-ubyte.gz" % (d, split)) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open("%s/%s-labels-idx1-ubyte.gz" % (d, split)) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    x = torch.from_numpy(x.astype(np.float32) / 255.0)
    return (x - 0.5) / 0.5, torch.from_numpy(y.astype(np.int64))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv0 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv1 = nn.Conv2d(32, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 32, 3, padding=1)
        self.conv3 = nn.Conv2d(32, 32, 3, padding=1)
        self.fc0 = nn.Linear(32 * 7 * 7, 512)
        self.fc1 = nn.Linear(512, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv0(x)), 2)
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.conv3(x))
        x = F.dropout(F.relu(self.fc0(x.flatten(1))), 0.5, self.training)
        return self.fc1(x)


def main():
    args = [a for a in sys.argv[1:] if a != "--bf16"]
    bf16 = len(args) < len(sys.argv) - 1
    dev = torch.device("cpu")
    if "--device" in args:
        i = args.index("--device")
        dev = torch.device(args[i + 1])
        del args[i:i + 2]
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    epochs = int(args[0])
    d = args[1] if len(args) > 1 else "/usr/share/datasets/fashion-mnist"
    layout = torch.channels_last if bf16 else torch.contiguous_format
    if bf16:
        torch.set_num_threads(len(os.sched_getaffinity(0)))
    torch.manual_seed(1)
    x, y = (t.to(dev) for t in load(d, "train"))
    tx, ty = (t.to(dev) for t in load(d, "t10k"))
    net = Net().to(dev, memory_format=layout)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    step = 0
    for epoch in range(1, epochs + 1):
        net.train()
        order = torch.randperm(len(y), device=dev)
        sync()
        start = time.perf_counter()
        for i in range(0, len(y) - 127, 128):
            idx = order[i:i + 128]
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
                loss = F.cross_entropy(net(x[idx].to(memory_format=layout)), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
        sync()
        print("Epoch %d (global_step %d) finished, time: %.1f sec." % (epoch, step, time.perf_counter() - start),
              flush=True)
        net.eval()
        with torch.no_grad():
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
                correct = sum(int((net(tx[i:i + 128].to(memory_format=layout)).argmax(1) == ty[i:i + 128]).sum())
                              for i in range(0, len(ty), 128))
        print("test accuracy: %.2f %%" % (100.0 * correct / len(ty)), flush=True)
        if epoch >= 2:
            for g in opt.param_groups:
                g["lr"] *= 0.6


if __name__ == "__main__":
    main()
