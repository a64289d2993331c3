"""What this machine's cores compute at best, in GFLOP/s: the yardsticks of ``speed.py``'s training rates.

    python benchmarks/peaks.py [--threads 1] [--device cpu|cuda]

A large matrix product (2048 x 2048 by 2048 x 2048, float32: 2 x 2048^3 FLOPs) and a large convolution
(64 images of 56 x 56 x 64 channels, 3 x 3, 64 outputs, channels_last, forward: 2 x 64 x 56 x 56 x 64 x 64 x 9
FLOPs), each the best of 5 timed calls after a warm-up. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time

import torch


def best_rate(fn, flops: float, device: torch.device, repeat: int = 5) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - started)
    return flops / best / 1e9


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    n = 2048
    a, b = torch.rand(n, n, device=device), torch.rand(n, n, device=device)
    matmul = best_rate(lambda: a @ b, 2 * n**3, device)
    images = torch.rand(64, 64, 56, 56, device=device).contiguous(memory_format=torch.channels_last)
    conv = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False).to(device).to(memory_format=torch.channels_last)
    with torch.no_grad():
        convolution = best_rate(lambda: conv(images), 2 * 64 * 56 * 56 * 64 * 64 * 9, device)
    print(json.dumps({"threads": args.threads, "matmul_gflops": matmul, "conv_gflops": convolution}))


if __name__ == "__main__":
    main()
