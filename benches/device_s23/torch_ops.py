#!/usr/bin/env python3
"""Where PyTorch (cuDNN, fp32, TF32 off, cudnn.benchmark on) spends the full-size SIGE generator's
GPU time: torch.profiler over --runs forward passes after a warm-up, CUDA time per module
(forward hooks bracket each leaf module with a record_function range) and per kernel.

    python3 benches/device_s23/torch_ops.py [--runs 20] [--density 0.3]

Prints two tables, µs per forward pass: per leaf module (its ops' CUDA kernels), per kernel name.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models"))
import sige  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--density", type=float, default=0.3)
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    cfg = sige.CONFIGS["full"]
    m = sige.Generator(cfg)
    sige.init_weights(m, sige.SEED)
    m = m.cuda().eval()
    x = torch.randn(1, 3, cfg["h"], cfg["w"], device="cuda")
    mask = (torch.rand(1, 1, cfg["h"], cfg["w"], device="cuda") < a.density).float()
    ranges = {}

    def pre(mod, _inp):
        ranges[mod] = torch.autograd.profiler.record_function("mod:" + mod._dyn_name)
        ranges[mod].__enter__()

    def post(mod, _inp, _out):
        ranges.pop(mod).__exit__(None, None, None)

    for name, mod in m.named_modules():
        if len(list(mod.children())) == 0:
            mod._dyn_name = name
            mod.register_forward_pre_hook(pre)
            mod.register_forward_hook(post)
    from torch.profiler import ProfilerActivity, profile
    with torch.no_grad():
        for _ in range(10):
            m(x, mask)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(a.runs):
                m(x, mask)
            torch.cuda.synchronize()
    ev = prof.key_averages()

    def dev_us(e):
        return getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0.0)

    # A record_function range is listed twice (its CPU range and its GPU annotation): keep one.
    merged = {}
    for e in ev:
        us, c = dev_us(e) / a.runs, e.count // a.runs
        if e.key not in merged or us > merged[e.key][0]:
            merged[e.key] = (us, c)
    rows = [(k, us, c) for k, (us, c) in merged.items()]
    mods = sorted([r for r in rows if r[0].startswith("mod:")], key=lambda r: -r[1])
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {a.runs} runs")
    print("per module (µs of CUDA time per pass, calls per pass):")
    tot = 0.0
    for k, us, c in mods:
        print(f"  {k[4:]:<28} {us:9.1f} {c:4d}")
        tot += us
    print(f"  {'sum of modules':<28} {tot:9.1f}")
    kern = sorted([r for r in rows if not r[0].startswith("mod:") and not r[0].startswith("aten::") and r[1] > 0], key=lambda r: -r[1])
    print("per kernel (µs per pass, launches per pass):")
    for k, us, c in kern[:40]:
        print(f"  {us:9.1f} {c:4d}  {k[:110]}")
    print("aten ops (CUDA µs per pass):")
    for k, us, c in sorted([r for r in rows if r[0].startswith("aten::") and r[1] > 0], key=lambda r: -r[1])[:25]:
        print(f"  {us:9.1f} {c:4d}  {k}")


if __name__ == "__main__":
    main()
