"""The per-kernel floor on the GPU host as PyTorch sees it, for launch_floor's figures: N tiny
kernels (an in-place add on one float) issued eagerly, then the same N captured in one CUDA graph
and replayed. µs per kernel, the median over samples of (elapsed / N) after warm-up.

    python3 benches/device_s21/torch_floor.py [--n 200] [--samples 31]
"""
import argparse
import statistics
import time

import torch


def per_kernel(step, n, samples):
    out = []
    for s in range(samples + 3):
        torch.cuda.synchronize()
        t = time.perf_counter()
        step()
        torch.cuda.synchronize()
        if s >= 3:
            out.append((time.perf_counter() - t) * 1e6 / n)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--samples", type=int, default=31)
    a = ap.parse_args()
    x = torch.rand(1, device="cuda") + 1.0

    def eager():
        for _ in range(a.n):
            x.add_(1.0)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        eager()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        eager()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"eager  {per_kernel(eager, a.n, a.samples):8.2f} us per kernel")
    print(f"graph  {per_kernel(g.replay, a.n, a.samples):8.2f} us per kernel")


if __name__ == "__main__":
    main()
