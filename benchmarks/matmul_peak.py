"""The machine's measured matrix-multiply peak, for the benchmarks that
report achieved GFLOP/s next to it: a 2048 x 2048 float32 and bfloat16
matmul with python3-torch (the same LibTorch and oneDNN as tptrain) on one
thread per CPU the process may use (as tptrain runs; LibTorch 1.13's default
would be half of them), the median of 7 after 2 warm-ups. Also whether
the CPU computes bfloat16 natively (AVX-512 BF16 or AMX-BF16).

usage: matmul_peak.py         prints "peak-fp32-gflops X", "peak-bf16-gflops Y",
                              "native-bf16 yes|no"."""
import os
import statistics
import time

import torch

torch.set_num_threads(len(os.sched_getaffinity(0)))


def native_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l for l in f if l.startswith("flags")), "").split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def gflops(dtype, n=2048):
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    for _ in range(2):
        a @ b
    times = []
    for _ in range(7):
        t = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t)
    return 2 * n ** 3 / statistics.median(times) / 1e9


if __name__ == "__main__":
    print("peak-fp32-gflops %.1f" % gflops(torch.float32), flush=True)
    print("peak-bf16-gflops %.1f" % gflops(torch.bfloat16), flush=True)
    print("native-bf16 %s" % ("yes" if native_bf16() else "no"))
