#!/usr/bin/env python3
"""PyTorch/cuDNN baselines for the GPU comparisons of issues 5 and 6 (fp32, TF32 off,
cudnn.benchmark on), timed on the same GPU in the same run as dynaspa's GPU bench.

    python3 benches/gpu_baselines.py --masks DIR [--batches 1,2,4] [--runs 200] [--json OUT]
    python3 benches/gpu_baselines.py --models [--runs 50] [--json OUT]
    python3 benches/gpu_baselines.py --attention DIR [--runs 200] [--json OUT]

Per op (the ops of issue 5: conv3x3 s1 40x40 256->256, conv1x1 40x40 256->256, conv3x3 s2
80x80->40x40 128->256, depthwise 3x3 40x40 256; bias + ReLU epilogue) and batch:
  cudnn   F.conv2d(x, w, b) + relu on the whole tensor: what a framework runs whatever the mask.
  gcs-B   gather-conv-scatter (SBNet / SIGE style) at block size B: active B x B output blocks
          are found from the mask on the GPU, their input patches (with halo) gathered into a
          batch, convolved without padding by cuDNN, and scattered into a zeroed output. The
          block-index computation (including its nonzero() sync) is part of the time, as it is
          part of every frame for those systems.
Masks come from DIR (`d{density}_b{batch}.npy`, uint8 [batch, H, W]), written by
`gpu_sparse_bench --dump-masks DIR`, so both sides see the same masks. --models times the full-size DynConv (ResNet-50 layout,
224x224), A-ViT (DeiT-S) and SIGE generators in PyTorch eager with cuDNN, batch 1: the dense
baseline of the end-to-end comparison (their masks multiply, they do not skip work).

--attention times A-ViT's attention (DeiT-S: 197 tokens, 6 heads x 64; the reduced model: 109
tokens, 2 heads x 32) on the token sets `gpu_sparse_bench --avit --dump-masks DIR` used
(`avit_{size}_d{density}_b{batch}.npy`, uint8 [batch, tokens]); q, k, v random normal with the
rows of halted tokens zero (A-ViT multiplies qkv by the mask), bias (m - 1) * 1e4 as
[B, 1, 1, T], scale dh^-0.5, fp32:
  sdpa    F.scaled_dot_product_attention(q, k, v, attn_mask=bias): the kernel PyTorch picks.
  manual  softmax(q k^T * scale + bias) v as three ops (matmul, softmax, matmul).
  gather  per image: active tokens by nonzero() (a sync), SDPA on the compacted q, k, v, the
          rows scattered into a zeroed output: active-token attention in PyTorch.
Each is checked against `manual` on the rows of active tokens before it is timed.

Timing: CUDA events around each call, median over --runs calls after --warmup calls; inputs
random normal (never all-zero). One JSON object per line on stdout (and in --json).
"""
import argparse
import json
import os
import statistics
import sys

import numpy as np
import torch
import torch.nn.functional as F

OPS = {
    # name: (cin, cout, k, stride, groups, in_hw)
    "conv3x3_s1_40x40_256": (256, 256, 3, 1, 1, 40),
    "conv1x1_40x40_256": (256, 256, 1, 1, 1, 40),
    "conv3x3_s2_80x80_128_256": (128, 256, 3, 2, 1, 80),
    "dw3x3_40x40_256": (256, 256, 3, 1, 256, 40),
}


def setup():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)


def time_cuda(fn, runs, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times), min(times)


class GatherConvScatter:
    """SBNet-style sparse conv: the blocks of `block` x `block` outputs with an active bit."""

    def __init__(self, w, b, stride, groups, block, out_hw):
        self.w, self.b, self.stride, self.groups, self.block = w, b, stride, groups, block
        k = w.shape[-1]
        self.pad = k // 2
        self.out_hw = out_hw
        self.nb = (out_hw + block - 1) // block
        # Input patch of one output block, in padded input coordinates.
        self.patch = (block - 1) * stride + k
        dev = w.device
        r = torch.arange(self.patch, device=dev)
        self.dy = r.view(-1, 1)
        self.dx = r.view(1, -1)

    def __call__(self, x, mask):
        n, c, h, wd = x.shape
        bs, s = self.block, self.stride
        # Block-level mask: any active output in the block (padded up to whole blocks).
        full = self.nb * bs
        m = F.pad(mask, (0, full - mask.shape[-1], 0, full - mask.shape[-2]))
        blk = F.max_pool2d(m, bs, bs)  # [n,1,nb,nb]
        idx = blk.flatten().nonzero().squeeze(1)  # sync: the count decides the batch size
        out = torch.zeros(n, self.w.shape[0], full, full, device=x.device)
        if idx.numel() == 0:
            return out[:, :, : self.out_hw, : self.out_hw]
        bi = idx // (self.nb * self.nb)
        by = (idx // self.nb) % self.nb
        bx = idx % self.nb
        # Pad so every patch of every (phantom) block is in range.
        need = (full - 1) * s + self.w.shape[-1]
        xp = F.pad(x, (self.pad, need - wd - self.pad, self.pad, need - h - self.pad))
        ys = (by * bs * s).view(-1, 1, 1) + self.dy
        xs = (bx * bs * s).view(-1, 1, 1) + self.dx
        patches = xp[bi.view(-1, 1, 1), :, ys, xs]  # [nblk, P, P, C]
        patches = patches.permute(0, 3, 1, 2).contiguous()
        y = F.relu(F.conv2d(patches, self.w, self.b, stride=s, groups=self.groups))  # [nblk,Co,B,B]
        ov = out.view(n, -1, self.nb, bs, self.nb, bs).permute(0, 2, 4, 1, 3, 5)
        ov[bi, by, bx] = y.view(-1, y.shape[1], bs, bs)
        return out[:, :, : self.out_hw, : self.out_hw]


def load_masks(d):
    """{(density_tag, batch): uint8 [batch, H, W]} from gpu_sparse_bench --dump-masks."""
    out = {}
    for f in sorted(os.listdir(d)):
        if f.startswith("d") and f.endswith(".npy") and "_b" in f:
            tag, b = f[1:-4].split("_b")
            out[(tag, int(b))] = np.load(os.path.join(d, f))
    if not out:
        sys.exit(f"gpu_baselines: no d*_b*.npy masks in {d}")
    return out


def bench_ops(args):
    masks = load_masks(args.masks)
    dev = torch.device("cuda")
    rows = []
    for name, (cin, cout, k, s, g, hw) in OPS.items():
        if args.only and args.only not in name:
            continue
        w = torch.randn(cout, cin // g, k, k, device=dev) * (2.0 / (cin // g * k * k)) ** 0.5
        b = torch.randn(cout, device=dev) * 0.1
        out_hw = hw // s
        for batch in args.batches:
            x = torch.randn(batch, cin, hw, hw, device=dev)
            dense_fn = lambda: F.relu(F.conv2d(x, w, b, stride=s, padding=k // 2, groups=g))
            med, mn0 = time_cuda(dense_fn, args.runs, args.warmup)
            rows.append(dict(kind="op", op=name, batch=batch, impl="cudnn", density=1.0, us=med, min_us=mn0))
            emit(rows[-1], args)
            # The conv alone (bias inside cuDNN's call, no separate ReLU kernel): the most
            # generous reading of the dense baseline.
            conv_fn = lambda: F.conv2d(x, w, b, stride=s, padding=k // 2, groups=g)
            med_c, mn_c = time_cuda(conv_fn, args.runs, args.warmup)
            rows.append(dict(kind="op", op=name, batch=batch, impl="cudnn-conv-only", density=1.0, us=med_c, min_us=mn_c))
            emit(rows[-1], args)
            for (tag, nb), ms in sorted(masks.items()):
                if nb != batch or ms.shape[-2:] != (out_hw, out_hw) or float(tag) >= 1.0:
                    continue
                density = float(ms.mean())
                mt = torch.from_numpy(ms.astype(np.float32)).to(dev).view(batch, 1, out_hw, out_hw)
                for block in args.blocks:
                    gcs = GatherConvScatter(w, b, s, g, block, out_hw)
                    # Correctness of the baseline on active positions, so its time is a real one.
                    ref = dense_fn() * mt
                    got = gcs(x, mt) * mt
                    err = (got - ref).norm() / ref.norm().clamp_min(1e-30)
                    if err > 1e-4:
                        sys.exit(f"gather-conv-scatter mismatch on {name} block {block}: rel L2 {err:.2e}")
                    us, mn = time_cuda(lambda: gcs(x, mt), args.runs, args.warmup)
                    row = dict(kind="op", op=name, batch=batch, impl=f"gcs-{block}", density_target=float(tag),
                               density=density, us=us, min_us=mn)
                    rows.append(row)
                    emit(row, args)
    return rows


AVIT_SIZES = {"deit_s": (197, 6, 64), "small": (109, 2, 32)}


def load_token_masks(d):
    """{(size, density_tag, batch): uint8 [batch, tokens]} from gpu_sparse_bench --avit --dump-masks."""
    out = {}
    for f in sorted(os.listdir(d)):
        if f.startswith("avit_") and f.endswith(".npy") and "_d" in f and "_b" in f:
            size, rest = f[len("avit_"):-4].rsplit("_d", 1)
            tag, b = rest.split("_b")
            if size in AVIT_SIZES:
                out[(size, tag, int(b))] = np.load(os.path.join(d, f))
    if not out:
        sys.exit(f"gpu_baselines: no avit_*_d*_b*.npy token masks in {d}")
    return out


def bench_attention(args):
    dev = torch.device("cuda")
    for (size, tag, batch), ms in sorted(load_token_masks(args.attention).items()):
        if args.only and args.only not in size:
            continue
        t, h, dh = AVIT_SIZES[size]
        if ms.shape != (batch, t):
            sys.exit(f"gpu_baselines: token mask {size} d{tag} b{batch} has shape {ms.shape}, expected {(batch, t)}")
        m = torch.from_numpy(ms.astype(np.float32)).to(dev)
        rows = m.view(batch, 1, t, 1)
        q, k, v = (torch.randn(batch, h, t, dh, device=dev) * rows for _ in range(3))
        bias = ((m - 1.0) * 1e4).view(batch, 1, 1, t)
        scale = dh ** -0.5
        active = [m[b].nonzero().squeeze(1) for b in range(batch)]

        def manual():
            return torch.softmax(q @ k.transpose(-2, -1) * scale + bias, dim=-1) @ v

        def sdpa():
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)

        def gather():
            out = torch.zeros_like(q)
            for b in range(batch):
                idx = m[b].nonzero().squeeze(1)  # sync: the count sizes the compacted tensors
                qa, ka, va = (x[b:b + 1].index_select(2, idx) for x in (q, k, v))
                out[b:b + 1].index_copy_(2, idx, F.scaled_dot_product_attention(qa, ka, va))
            return out

        want = manual()
        for name, fn in (("sdpa", sdpa), ("gather", gather)):
            got = fn()
            for b in range(batch):
                a = active[b]
                ref = want[b][:, a]
                err = ((got[b][:, a] - ref).norm() / ref.norm().clamp_min(1e-30)).item()
                if err > 1e-4:
                    sys.exit(f"gpu_baselines: attention {name} differs from manual on {size} d{tag} b{batch}: rel L2 {err:.2e}")
        density = float(ms.mean())
        for name, fn in (("sdpa", sdpa), ("manual", manual), ("gather", gather)):
            with torch.no_grad():
                us, mn = time_cuda(fn, args.runs, args.warmup)
            emit(dict(kind="attention", size=size, tokens=t, heads=h, head_dim=dh, batch=batch, impl=name,
                      density_target=float(tag), density=density, us=us, min_us=mn), args)


def bench_models(args):
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models")
    sys.path.insert(0, here)
    import dynconv, avit, sige  # noqa: E402
    dev = torch.device("cuda")
    cases = []
    cfg = dynconv.CONFIGS["full"]
    m = dynconv.DynConvResNet(cfg)
    dynconv.init_weights(m, dynconv.SEED)
    cases.append(("dynconv_full", m, (torch.randn(1, 3, cfg["h"], cfg["w"]),)))
    acfg = avit.CONFIGS["full"]
    am = avit.AViT(acfg)
    cases.append(("avit_full", am, (torch.randn(1, 3, acfg["h"], acfg["w"]),)))
    scfg = sige.CONFIGS["full"]
    sm = sige.Generator(scfg)
    smask = (torch.rand(1, 1, scfg["h"], scfg["w"]) < 0.3).float()
    cases.append(("sige_full", sm, (torch.randn(1, 3, scfg["h"], scfg["w"]), smask)))
    for name, model, inputs in cases:
        model = model.to(dev).eval()
        inputs = tuple(t.to(dev) for t in inputs)
        with torch.no_grad():
            med, mn = time_cuda(lambda: model(*inputs), args.runs, args.warmup)
        emit(dict(kind="model", model=name, impl="pytorch-cudnn", batch=1, us=med, min_us=mn), args)


def emit(row, args):
    row["device"] = torch.cuda.get_device_name(0)
    row["torch"] = torch.__version__
    row["cudnn"] = torch.backends.cudnn.version()
    line = json.dumps(row)
    print(line, flush=True)
    if args.json:
        with open(args.json, "a") as f:
            f.write(line + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--masks", help="directory of d{density}_b{batch}.npy masks (gpu_sparse_bench --dump-masks)")
    p.add_argument("--models", action="store_true")
    p.add_argument("--attention", help="directory of avit_*_d*_b*.npy token masks (gpu_sparse_bench --avit --dump-masks)")
    p.add_argument("--batches", default="1,2,4")
    p.add_argument("--blocks", default="4,8")
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--only", default="")
    p.add_argument("--json")
    args = p.parse_args()
    args.batches = [int(b) for b in args.batches.split(",")]
    args.blocks = [int(b) for b in args.blocks.split(",")]
    if not torch.cuda.is_available():
        sys.exit("gpu_baselines: CUDA is not available to PyTorch")
    setup()
    if args.masks:
        bench_ops(args)
    if args.models:
        bench_models(args)
    if args.attention:
        bench_attention(args)
    if not (args.masks or args.models or args.attention):
        sys.exit("gpu_baselines: give --masks DIR, --attention DIR and/or --models")


if __name__ == "__main__":
    main()
