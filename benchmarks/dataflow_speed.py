"""The baseline of benchmark dataflow-speed: python3-torch's DataLoader doing
the work of tools/test_data_speed --augment: decode the Fashion-MNIST IDX
images (u8 -> f32 / 255), normalise to [-1, 1], pad by 2 and crop 28x28 at
random, flip horizontally with probability 0.5, batch by 128, with the same
number of worker processes as tptrain's threads.

usage: dataflow_speed.py WORKERS BATCHES [DIR]
prints: python-dataloader IMAGES_PER_S images/s"""
import gzip
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class FashionMnist(Dataset):
    def __init__(self, d):
        with gzip.open(d + "/train-images-idx3-ubyte.gz") as f:
            self.images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
        with gzip.open(d + "/train-labels-idx1-ubyte.gz") as f:
            self.labels = np.frombuffer(f.read(), np.uint8, offset=8)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = torch.from_numpy(self.images[i].copy()).float().div_(255).unsqueeze_(0)
        x = (x - 0.5) / 0.5
        x = F.pad(x, (2, 2, 2, 2))
        top, left = np.random.randint(0, 5), np.random.randint(0, 5)
        x = x[:, top:top + 28, left:left + 28]
        if np.random.rand() < 0.5:
            x = x.flip(-1)
        return x, int(self.labels[i])


def main():
    workers, batches = int(sys.argv[1]), int(sys.argv[2])
    d = sys.argv[3] if len(sys.argv) > 3 else "/usr/share/datasets/fashion-mnist"
    torch.set_num_threads(1)
    loader = DataLoader(FashionMnist(d), batch_size=128, shuffle=True, num_workers=workers, drop_last=True,
                        persistent_workers=workers > 0)
    it = iter(loader)
    for _ in range(10):  # warm-up, as the tool does
        next(it)
    start, images = time.perf_counter(), 0
    for _ in range(batches):
        try:
            x, _ = next(it)
        except StopIteration:
            it = iter(loader)
            x, _ = next(it)
        images += x.shape[0]
    secs = time.perf_counter() - start
    print("python-dataloader %.0f images/s" % (images / secs))


if __name__ == "__main__":
    main()
