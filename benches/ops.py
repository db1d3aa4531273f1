#!/usr/bin/env python3
"""Single GPU ops against the vendor library: dynaspa's sparse conv members
(backends/examples/gpu_sparse_bench.rs) and PyTorch's cuDNN on the same masks, in the same run.

    python3 benches/ops.py run [--bench BIN] [--backend cuda] [--device SEL] [--out DIR]
                               [--batches 1,2,4] [--densities 0.1,0.3,0.5] [--only conv1x1]
                               [--knobs N | --schedules LIST] [--samples 15] [--runs 10]
                               [--fused-finish on|off|both] [--env NAME=VALUE ...] [--no-torch]
    python3 benches/ops.py torch --masks DIR [--batches 1,2,4] [--blocks 4,8] [--runs 200] [--json OUT]
    python3 benches/ops.py attention --masks DIR [--runs 200] [--json OUT]
    python3 benches/ops.py table OURS.jsonl [TORCH.jsonl] [--fused-finish on|off]
    python3 benches/ops.py ab NEW.jsonl OLD.jsonl [NEW2.jsonl OLD2.jsonl ...]
    python3 benches/ops.py rank OURS.jsonl [--top 12]
    python3 benches/ops.py dense [--bench BIN] [--rounds 2]
    python3 benches/ops.py launch-floor [--n 200] [--samples 31]
    python3 benches/ops.py floor --masks DIR [--batches 1,2,4] [--frames 1000] [--variant co64_ct8_w8]
    python3 benches/ops.py nvrtc backends/src/gpu/kernels/sparse_conv_gemm.cl -D TM=64 -D TN=32 ... [--out PREFIX]
    python3 benches/ops.py ptx-ops FILE.ptx|FILE.clbin ... [--entry sparse_conv_gemm_f32]

run         builds nothing: runs gpu_sparse_bench (`cargo build --release -p dynaspa-backends
            --example gpu_sparse_bench`) with the flags given, its masks dumped to OUT, then
            PyTorch on those masks (unless --no-torch or PyTorch has no CUDA), then `table`.
            --env sets variables for the bench only (A/B arms: run twice into two OUTs, then `ab`).
torch       cuDNN's conv + bias + ReLU on the whole tensor (what a framework runs whatever the
            mask; `cudnn-conv-only`: the conv alone), and gather-conv-scatter (SBNet / SIGE style)
            at block sizes --blocks: active B x B output blocks found on the GPU (their nonzero()
            sync included), patches with halo gathered, convolved by cuDNN, scattered into a
            zeroed output; checked against dense x mask before it is timed. Masks: DIR's
            d{density}_b{batch}.npy (uint8 [batch, H, W]) from gpu_sparse_bench --dump-masks.
attention   A-ViT's attention (DeiT-S: 197 tokens, 6 heads x 64; reduced: 109 tokens, 2 x 32) on
            the token sets of `gpu_sparse_bench --avit --dump-masks DIR`: PyTorch's SDPA with the
            additive key mask, the three-op form, and active-token SDPA (gather, attend, scatter).
table       per op, batch and density: our dense member, the fastest member alone, the steady
            member with lagged dispatch (what a frame pays) and, where the bench timed it, the
            op's whole frame launch by launch and from one recorded CUDA graph; cuDNN and the best
            gather-conv-scatter; the lagged member's speedup over cuDNN (over our dense member
            without PyTorch rows).
ab          two bench runs of the same ops side by side: per op, batch and density, each run's
            dense and fastest member, and the median ratio (new / old) over the members both
            timed, apart for members whose split finish could fuse (TM x TN x KS <= 32768).
rank        the fastest members per op, batch and density, with the work-groups their GEMM
            launches (to read a sweep's winners against the device's SMs).
dense       our dense member with cuDNN off / timed / forced (DYNASPA_CUDNN=0|1|force) against
            PyTorch's cuDNN, --rounds interleaved rounds on the same masks.
launch-floor what one kernel costs PyTorch on this GPU: N one-float adds eager, and the same N
            captured in one CUDA graph (µs per kernel); backends/examples/launch_floor.rs is ours.
floor       compiles benches/cuda/conv1x1_floor.cu (nvcc, sm_90) and runs it on DIR's masks: the
            benchmark conv1x1 (256 -> 256, 40 x 40, bias, ReLU) in one hand-written launch, the
            floor a sparse member of that op can aim at.
nvrtc       compiles a shared kernel source as the CUDA backend does (cuda/prelude.h, common.h,
            the file; NVRTC, sm_90 unless --arch) and prints ptxas' registers, spills and shared
            memory per entry; --out writes PREFIX.ptx and PREFIX.cubin. libnvrtc: --nvrtc-lib, or
            the nvidia-cuda-nvrtc wheel.
ptx-ops     counts the PTX instructions of one kernel entry in .ptx files or in dynaspa's OpenCL
            program cache files (.clbin, whose binary NVIDIA's OpenCL makes PTX).

PyTorch: fp32, TF32 off, cudnn.benchmark on; CUDA events around each call, median over --runs
calls after --warmup; inputs random normal (never all zero). PyTorch rows are JSON lines on
stdout and in --json. Results go to benches/RESULTS.md with the command, the device and the date.
"""
import argparse
import collections
import ctypes
import json
import os
import re
import statistics
import struct
import subprocess
import sys

from bench_common import emit, time_cuda, torch_setup

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_BIN = os.path.join(ROOT, "target", "release", "examples", "gpu_sparse_bench")
FUSED_MAX = 32768  # partial sums a fused split-K finish may hold (TM x TN x KS)

# gpu_sparse_bench's op names -> (PyTorch's name, cin, cout, k, stride, groups, input H = W)
OPS = {
    "conv3x3": ("conv3x3_s1_40x40_256", 256, 256, 3, 1, 1, 40),
    "conv1x1": ("conv1x1_40x40_256", 256, 256, 1, 1, 1, 40),
    "conv3x3s2": ("conv3x3_s2_80x80_128_256", 128, 256, 3, 2, 1, 80),
    "dw3x3": ("dw3x3_40x40_256", 256, 256, 3, 1, 256, 40),
}
TORCH_OP = {ours: spec[0] for ours, spec in OPS.items()}
AVIT_SIZES = {"deit_s": (197, 6, 64), "small": (109, 2, 32)}


def rows(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def med(v):
    return statistics.median(v) if v else float("nan")


# ---------------------------------------------------------------------------------------------
# PyTorch baselines


class GatherConvScatter:
    """SBNet-style sparse conv: the blocks of `block` x `block` outputs with an active bit."""

    def __init__(self, torch, w, b, stride, groups, block, out_hw):
        self.torch, self.w, self.b, self.stride, self.groups, self.block = torch, w, b, stride, groups, block
        k = w.shape[-1]
        self.pad = k // 2
        self.out_hw = out_hw
        self.nb = (out_hw + block - 1) // block
        # Input patch of one output block, in padded input coordinates.
        self.patch = (block - 1) * stride + k
        r = torch.arange(self.patch, device=w.device)
        self.dy = r.view(-1, 1)
        self.dx = r.view(1, -1)

    def __call__(self, x, mask):
        torch = self.torch
        F = torch.nn.functional
        n, _, h, wd = x.shape
        bs, s = self.block, self.stride
        full = self.nb * bs
        m = F.pad(mask, (0, full - mask.shape[-1], 0, full - mask.shape[-2]))
        blk = F.max_pool2d(m, bs, bs)  # [n, 1, nb, nb]
        idx = blk.flatten().nonzero().squeeze(1)  # sync: the count decides the batch size
        out = torch.zeros(n, self.w.shape[0], full, full, device=x.device)
        if idx.numel() == 0:
            return out[:, :, : self.out_hw, : self.out_hw]
        bi = idx // (self.nb * self.nb)
        by = (idx // self.nb) % self.nb
        bx = idx % self.nb
        need = (full - 1) * s + self.w.shape[-1]
        xp = F.pad(x, (self.pad, need - wd - self.pad, self.pad, need - h - self.pad))
        ys = (by * bs * s).view(-1, 1, 1) + self.dy
        xs = (bx * bs * s).view(-1, 1, 1) + self.dx
        patches = xp[bi.view(-1, 1, 1), :, ys, xs].permute(0, 3, 1, 2).contiguous()
        y = F.relu(F.conv2d(patches, self.w, self.b, stride=s, groups=self.groups))
        ov = out.view(n, -1, self.nb, bs, self.nb, bs).permute(0, 2, 4, 1, 3, 5)
        ov[bi, by, bx] = y.view(-1, y.shape[1], bs, bs)
        return out[:, :, : self.out_hw, : self.out_hw]


def load_masks(d):
    """{(density_tag, batch): uint8 [batch, H, W]} from gpu_sparse_bench --dump-masks."""
    import numpy as np
    out = {}
    for f in sorted(os.listdir(d)):
        m = re.fullmatch(r"d([0-9.]+)_b(\d+)\.npy", f)
        if m:
            out[(m.group(1), int(m.group(2)))] = np.load(os.path.join(d, f))
    if not out:
        sys.exit(f"ops.py: no d*_b*.npy masks in {d}")
    return out


def cmd_torch(a):
    import numpy as np
    torch = torch_setup("ops.py")
    F = torch.nn.functional
    masks = load_masks(a.masks)
    dev = torch.device("cuda")
    for _, (name, cin, cout, k, s, g, hw) in OPS.items():
        if a.only and a.only not in name:
            continue
        w = torch.randn(cout, cin // g, k, k, device=dev) * (2.0 / (cin // g * k * k)) ** 0.5
        b = torch.randn(cout, device=dev) * 0.1
        out_hw = hw // s
        for batch in a.batches:
            x = torch.randn(batch, cin, hw, hw, device=dev)
            dense_fn = lambda: F.relu(F.conv2d(x, w, b, stride=s, padding=k // 2, groups=g))
            us, mn = time_cuda(torch, dense_fn, a.runs, a.warmup)
            emit(torch, dict(kind="op", op=name, batch=batch, impl="cudnn", density=1.0, us=us, min_us=mn), a.json)
            conv_fn = lambda: F.conv2d(x, w, b, stride=s, padding=k // 2, groups=g)
            us, mn = time_cuda(torch, conv_fn, a.runs, a.warmup)
            emit(torch, dict(kind="op", op=name, batch=batch, impl="cudnn-conv-only", density=1.0, us=us, min_us=mn), a.json)
            for (tag, nb), ms in sorted(masks.items()):
                if nb != batch or ms.shape[-2:] != (out_hw, out_hw) or float(tag) >= 1.0:
                    continue
                mt = torch.from_numpy(ms.astype(np.float32)).to(dev).view(batch, 1, out_hw, out_hw)
                for block in a.blocks:
                    gcs = GatherConvScatter(torch, w, b, s, g, block, out_hw)
                    ref = dense_fn() * mt
                    err = ((gcs(x, mt) * mt - ref).norm() / ref.norm().clamp_min(1e-30)).item()
                    if err > 1e-4:
                        sys.exit(f"ops.py: gather-conv-scatter differs on {name} block {block}: rel L2 {err:.2e}")
                    us, mn = time_cuda(torch, lambda: gcs(x, mt), a.runs, a.warmup)
                    emit(torch, dict(kind="op", op=name, batch=batch, impl=f"gcs-{block}", density_target=float(tag),
                                     density=float(ms.mean()), us=us, min_us=mn), a.json)


def cmd_attention(a):
    import numpy as np
    torch = torch_setup("ops.py")
    F = torch.nn.functional
    dev = torch.device("cuda")
    found = {}
    for f in sorted(os.listdir(a.masks)):
        m = re.fullmatch(r"avit_(.+)_d([0-9.]+)_b(\d+)\.npy", f)
        if m and m.group(1) in AVIT_SIZES:
            found[(m.group(1), m.group(2), int(m.group(3)))] = np.load(os.path.join(a.masks, f))
    if not found:
        sys.exit(f"ops.py: no avit_*_d*_b*.npy token masks in {a.masks}")
    for (size, tag, batch), ms in sorted(found.items()):
        if a.only and a.only not in size:
            continue
        t, h, dh = AVIT_SIZES[size]
        if ms.shape != (batch, t):
            sys.exit(f"ops.py: token mask {size} d{tag} b{batch} has shape {ms.shape}, expected {(batch, t)}")
        m = torch.from_numpy(ms.astype(np.float32)).to(dev)
        # A-ViT multiplies qkv by the mask: halted tokens' rows are zero.
        q, k, v = (torch.randn(batch, h, t, dh, device=dev) * m.view(batch, 1, t, 1) for _ in range(3))
        bias = ((m - 1.0) * 1e4).view(batch, 1, 1, t)
        scale = dh ** -0.5
        active = [m[i].nonzero().squeeze(1) for i in range(batch)]

        def manual():
            return torch.softmax(q @ k.transpose(-2, -1) * scale + bias, dim=-1) @ v

        def sdpa():
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)

        def gather():
            out = torch.zeros_like(q)
            for i in range(batch):
                idx = m[i].nonzero().squeeze(1)  # sync: the count sizes the compacted tensors
                qa, ka, va = (z[i:i + 1].index_select(2, idx) for z in (q, k, v))
                out[i:i + 1].index_copy_(2, idx, F.scaled_dot_product_attention(qa, ka, va))
            return out

        want = manual()
        for name, fn in (("sdpa", sdpa), ("gather", gather)):
            got = fn()
            for i in range(batch):
                ref = want[i][:, active[i]]
                err = ((got[i][:, active[i]] - ref).norm() / ref.norm().clamp_min(1e-30)).item()
                if err > 1e-4:
                    sys.exit(f"ops.py: attention {name} differs from the three-op form on {size} d{tag} b{batch}: rel L2 {err:.2e}")
        for name, fn in (("sdpa", sdpa), ("manual", manual), ("gather", gather)):
            with torch.no_grad():
                us, mn = time_cuda(torch, fn, a.runs, a.warmup)
            emit(torch, dict(kind="attention", size=size, tokens=t, heads=h, head_dim=dh, batch=batch, impl=name,
                             density_target=float(tag), density=float(ms.mean()), us=us, min_us=mn), a.json)


def cmd_launch_floor(a):
    import time
    torch = torch_setup("ops.py")
    x = torch.rand(1, device="cuda") + 1.0

    def eager():
        for _ in range(a.n):
            x.add_(1.0)

    def per_kernel(step):
        out = []
        for s in range(a.samples + 3):
            torch.cuda.synchronize()
            t = time.perf_counter()
            step()
            torch.cuda.synchronize()
            if s >= 3:
                out.append((time.perf_counter() - t) * 1e6 / a.n)
        return statistics.median(out)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        eager()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        eager()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"eager  {per_kernel(eager):8.2f} us per kernel")
    print(f"graph  {per_kernel(g.replay):8.2f} us per kernel")


# ---------------------------------------------------------------------------------------------
# Reading gpu_sparse_bench --json


def by_op(rs, fused=None):
    """Rows grouped by (op, batch, density target); `fused` keeps one finish path of a
    `--fused-finish both` run."""
    out = {}
    for o in rs:
        if fused is not None and o.get("fused_finish") is not None and o["fused_finish"] != fused:
            continue
        out.setdefault((o["op"].split("+")[0], o["batch"], o["density_target"]), []).append(o)
    return dict(sorted(out.items()))


def cudnn_us(torch_rows, op, batch, impl="cudnn"):
    v = [t["us"] for t in torch_rows if t.get("op") == TORCH_OP.get(op, op) and t.get("batch") == batch and t.get("impl") == impl]
    return v[0] if v else float("nan")


def cmd_table(a):
    ours = rows(a.ours)
    torch_rows = rows(a.torch) if a.torch else []
    fused = {"on": True, "off": False}.get(a.fused_finish)
    print(f"{'op':<10} {'b':>2} {'dens':>5} | {'dense':>7} {'best':>7} {'lagged':>7} {'frame':>7} {'graph':>7} | "
          f"{'cuDNN':>7} {'conv':>7} {'gcs':>7} | {'speedup':>8}  steady member (fastest alone)")
    for (op, b, d), group in by_op(ours, fused).items():
        dense = next((o["us"] for o in group if o["member"] == "dense"), float("nan"))
        sparse = [o for o in group if o["member"] != "dense"] or group
        best = min(sparse, key=lambda o: o["us"])
        g0 = group[0]
        lag = g0.get("steady_lagged_us", float("nan"))
        cu, co = cudnn_us(torch_rows, op, b), cudnn_us(torch_rows, op, b, "cudnn-conv-only")
        gcs = [t["us"] for t in torch_rows if t.get("op") == TORCH_OP.get(op, op) and t.get("batch") == b
               and str(t.get("impl", "")).startswith("gcs") and abs(t.get("density_target", 1.0) - d) < 1e-6]
        if torch_rows:
            speed = f"{cu / lag:7.2f}x"
        else:
            speed = f"{dense / lag:6.2f}x d"
        print(f"{op:<10} {b:>2} {d:>5.2f} | {dense:>7.1f} {best['us']:>7.1f} {lag:>7.1f} {g0.get('frame_us', float('nan')):>7.1f} "
              f"{g0.get('frame_graph_us', float('nan')):>7.1f} | {cu:>7.1f} {co:>7.1f} {min(gcs) if gcs else float('nan'):>7.1f} | "
              f"{speed}  {g0.get('steady_member', '-')} ({best['member']})")
    if not torch_rows:
        print("(no PyTorch rows: speedup marked d is over our dense member)")


def fusable(member):
    m = re.search(r"m(\d+)n(\d+)k\d+_w\d+x\d+_s(\d+)", member)
    return bool(m) and int(m.group(3)) > 1 and int(m.group(1)) * int(m.group(2)) * int(m.group(3)) <= FUSED_MAX


def cmd_ab(a):
    if len(a.runs) < 2 or len(a.runs) % 2:
        sys.exit("ops.py ab: give pairs NEW.jsonl OLD.jsonl")
    for new_p, old_p in zip(a.runs[::2], a.runs[1::2]):
        new = {k: {o["member"]: o for o in g} for k, g in by_op(rows(new_p)).items()}
        old = {k: {o["member"]: o for o in g} for k, g in by_op(rows(old_p)).items()}
        print(f"{new_p} / {old_p}")
        for key in sorted(set(new) & set(old)):
            n, o = new[key], old[key]
            both = [m for m in n if m != "dense" and m in o]
            fastest = lambda run: min((v["us"], m) for m, v in run.items() if m != "dense")
            fn, fo = fastest(n), fastest(o)
            dn, do = n.get("dense", {}).get("us", float("nan")), o.get("dense", {}).get("us", float("nan"))
            print(f"  {key[0]:<10} b{key[1]} {key[2]:.2f}: dense {dn:.1f} / {do:.1f}, fastest {fn[0]:.1f} ({fn[1]}) / "
                  f"{fo[0]:.1f} ({fo[1]}), steady lagged {next(iter(n.values())).get('steady_lagged_us', float('nan')):.1f} / "
                  f"{next(iter(o.values())).get('steady_lagged_us', float('nan')):.1f}")
            for label, ms in (("fusable", [m for m in both if fusable(m)]), ("other", [m for m in both if not fusable(m)])):
                if ms:
                    r = [n[m]["us"] / o[m]["us"] for m in ms]
                    print(f"    {label:<8} {len(ms):>3} members: new / old median {med(r):.3f} ({min(r):.3f}-{max(r):.3f})")


def cmd_rank(a):
    def ceil_div(x, y):
        return -(-x // y)

    def groups(member, cols, batch, cout=256, k=256):
        m = re.search(r"m(\d+)n(\d+)k(\d+)_w\d+x\d+_s(\d+)", member)
        if not m:
            return ""
        tm, tn, tk, ks = map(int, m.groups())
        chunk = ceil_div(ceil_div(k, ks), tk) * tk  # each split takes whole stages of TK
        working = ceil_div(k, chunk)  # only the splits that get a stage run
        return f"{ceil_div(cols, tn) * batch * ceil_div(cout, tm) * working} groups ({working} splits)"

    for (op, b, d), g in by_op(rows(a.ours)).items():
        cols = round(1600 * g[0]["density"])  # per 40 x 40 image, on average
        print(f"{op} b{b} d{d} (~{cols} columns per image): {len(g)} members; steady {g[0].get('steady_member')} "
              f"{g[0].get('steady_lagged_us', float('nan')):.1f} lagged")
        for o in sorted((o for o in g if o["member"] != "dense"), key=lambda o: o["us"])[:a.top]:
            print(f"  {o['us']:7.1f}  {o['member']:<36} {groups(o['member'], cols, b)}")


# ---------------------------------------------------------------------------------------------
# Orchestration: our bench, then PyTorch on the same masks


def bench_cmd(a, masks_dir, json_path):
    cmd = [a.bench, "--backend", a.backend, "--dump-masks", masks_dir, "--json", json_path,
           "--samples", str(a.samples), "--runs", str(a.runs_per_sample)]
    for flag in ("device", "batches", "densities", "only", "schedules", "fused_finish", "masks_file"):
        v = getattr(a, flag, None)
        if v:
            cmd += ["--masks" if flag == "masks_file" else "--" + flag.replace("_", "-"), str(v)]
    if a.knobs:
        cmd += ["--knobs", str(a.knobs)]
    return cmd


def with_env(pairs):
    env = dict(os.environ)
    for kv in pairs or []:
        k, _, v = kv.partition("=")
        env[k] = v
    return env


def torch_has_cuda():
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


def cmd_run(a):
    if not os.path.exists(a.bench):
        sys.exit(f"ops.py: no bench at {a.bench}: cargo build --release -p dynaspa-backends --example gpu_sparse_bench")
    os.makedirs(a.out, exist_ok=True)
    masks, ours, torch_json = (os.path.join(a.out, p) for p in ("masks", "ours.jsonl", "torch.jsonl"))
    os.makedirs(masks, exist_ok=True)
    for p in (ours, torch_json):
        if os.path.exists(p):
            os.remove(p)
    cmd = bench_cmd(a, masks, ours)
    print("+", " ".join(cmd), flush=True)
    with open(os.path.join(a.out, "ours.txt"), "w") as log:
        rc = subprocess.run(cmd, env=with_env(a.env), stdout=log, stderr=subprocess.STDOUT).returncode
    text = open(os.path.join(a.out, "ours.txt")).read()
    wrong = [l for l in text.splitlines() if l.startswith("WRONG")]
    if rc != 0:
        sys.exit(f"ops.py: gpu_sparse_bench exited {rc}; see {a.out}/ours.txt")
    if wrong:
        print("\n".join(wrong))
    have_torch = not a.no_torch and a.backend == "cuda" and torch_has_cuda()
    if have_torch:
        batches = a.batches or "1,2,4"
        tcmd = [sys.executable, os.path.abspath(__file__), "torch", "--masks", masks, "--batches", batches,
                "--runs", str(a.torch_runs), "--json", torch_json] + (["--only", TORCH_OP.get(a.only, a.only)] if a.only else [])
        print("+", " ".join(tcmd), flush=True)
        subprocess.run(tcmd, check=True, stdout=subprocess.DEVNULL)
    cmd_table(argparse.Namespace(ours=ours, torch=torch_json if have_torch else None, fused_finish=None))


def cmd_dense(a):
    """Our dense member with cuDNN off / timed / forced against PyTorch, rounds interleaved."""
    if not os.path.exists(a.bench):
        sys.exit(f"ops.py: no bench at {a.bench}")
    os.makedirs(a.out, exist_ok=True)
    masks = os.path.join(a.out, "masks")
    os.makedirs(masks, exist_ok=True)
    rs, torch_rows = [], []
    for r in range(1, a.rounds + 1):
        for mode in ("0", "1", "force"):
            path = os.path.join(a.out, f"dense_{mode}_{r}.jsonl")
            cmd = [a.bench, "--backend", "cuda", "--densities", "1.0", "--samples", "30", "--runs", "10",
                   "--dump-masks", masks, "--json", path]
            subprocess.run(cmd, env=with_env([f"DYNASPA_CUDNN={mode}"]), check=True, stdout=subprocess.DEVNULL)
            rs += [dict(o, mode=mode) for o in rows(path)]
        tpath = os.path.join(a.out, f"torch_{r}.jsonl")
        subprocess.run([sys.executable, os.path.abspath(__file__), "torch", "--masks", masks, "--runs", "200", "--json", tpath],
                       check=True, stdout=subprocess.DEVNULL)
        torch_rows += rows(tpath)
    print(f"{'op':<10} {'batch':>5} {'ours':>8} {'timed':>8} {'forced':>8} {'torch':>8} {'t-conv':>8} {'timed/torch':>11}  timed impl | forced impl")
    for op in OPS:
        for b in (1, 2, 4):
            d = lambda m: [o for o in rs if o["op"] == op and o["batch"] == b and o["mode"] == m and o["member"] == "dense"]
            ours, timed, forced = (med([o["us"] for o in d(m)]) for m in ("0", "1", "force"))
            tc = med([t["us"] for t in torch_rows if t.get("op") == TORCH_OP[op] and t.get("batch") == b and t.get("impl") == "cudnn"])
            tco = med([t["us"] for t in torch_rows if t.get("op") == TORCH_OP[op] and t.get("batch") == b and t.get("impl") == "cudnn-conv-only"])
            impl = lambda m: d(m)[0].get("dense_impl", "-") if d(m) else "-"
            print(f"{op:<10} {b:>5} {ours:>8.1f} {timed:>8.1f} {forced:>8.1f} {tc:>8.1f} {tco:>8.1f} {timed / tc:>11.3f}  {impl('1')} | {impl('force')}")


def cmd_floor(a):
    src = os.path.join(ROOT, "benches", "cuda", "conv1x1_floor.cu")
    exe = os.path.join(a.build_dir, "conv1x1_floor")
    os.makedirs(a.build_dir, exist_ok=True)
    subprocess.run(["nvcc", "-O2", f"-arch={a.arch}", "-o", exe, src], check=True)
    for b in a.batches.split(","):
        path = os.path.join(a.masks, f"d{a.density:.2f}_b{b}.npy")
        if not os.path.exists(path):
            sys.exit(f"ops.py: no mask file {path} (gpu_sparse_bench --only conv1x1 --densities {a.density} --dump-masks)")
        cmd = [exe, path, str(a.frames)] + ([a.variant] if a.variant else [])
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)


# ---------------------------------------------------------------------------------------------
# What the compilers make of a kernel


def nvrtc_lib(explicit):
    if explicit:
        return explicit
    try:
        import importlib.metadata as md
        d = md.distribution("nvidia-cuda-nvrtc")
        for f in d.files or []:
            if os.path.basename(str(f)).startswith("libnvrtc.so"):
                return str(d.locate_file(f))
    except Exception:
        pass
    sys.exit("ops.py: no libnvrtc (pip install nvidia-cuda-nvrtc, or --nvrtc-lib PATH)")


def nvrtc_compile(lib, source, options, name="kernel.cu"):
    """(return code, log, PTX, CUBIN); PTX and CUBIN are None where the compile failed."""
    nvrtc = ctypes.CDLL(lib)
    prog = ctypes.c_void_p()
    if nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None):
        raise RuntimeError("nvrtcCreateProgram failed")
    arr = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
    rc = nvrtc.nvrtcCompileProgram(prog, len(options), arr)

    def fetch(size_of, get, text):
        n = ctypes.c_size_t()
        size_of(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        get(prog, buf)
        return buf.value if text else buf.raw

    log = fetch(nvrtc.nvrtcGetProgramLogSize, nvrtc.nvrtcGetProgramLog, True).decode()
    if rc:
        return rc, log, None, None
    ptx = fetch(nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX, True)
    cubin = fetch(nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN, False)
    return rc, log, ptx, cubin


# The parts a program is made of, after common.h, as backends/src/gpu/kernels.rs assembles them.
PARTS = {
    "sparse_conv_gemm.cl": ["sparse_conv_common.h", "sparse_conv_knobs.h", "sparse_conv_stage.h", "sparse_conv_list.h", "sparse_conv_gemm.cl"],
    "sparse_conv_dw.cl": ["sparse_conv_common.h", "sparse_conv_dw.cl"],
    "sparse_conv_fill.cl": ["sparse_conv_common.h", "sparse_conv_fill.cl"],
}


def cmd_nvrtc(a):
    kernels = os.path.dirname(os.path.abspath(a.source))
    name = os.path.basename(a.source)
    src = open(os.path.join(ROOT, "backends", "src", "cuda", "prelude.h")).read()
    for part in ["common.h"] + PARTS.get(name, [name]):
        src += f'\n#line 1 "{part}"\n' + open(os.path.join(kernels, part)).read()
    opts = [f"--gpu-architecture={a.arch}", "--device-as-default-execution-space", "--ptxas-options=-v", "-std=c++17"]
    opts += ["-D" + d for d in a.define]
    rc, log, ptx, cubin = nvrtc_compile(nvrtc_lib(a.nvrtc_lib), src, opts, "k.cu")
    if rc:
        sys.exit(log)
    lines = log.splitlines()
    for i, line in enumerate(lines):
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            info = " | ".join(" ".join(l.split()) for l in lines[i + 1:i + 4] if l.strip().startswith("ptxas info"))
            print(f"{m.group(1)}: {info}")
    if a.out:
        open(a.out + ".ptx", "wb").write(ptx)
        open(a.out + ".cubin", "wb").write(cubin)
        print(f"wrote {a.out}.ptx and {a.out}.cubin")


def ptx_of(path):
    """(cache key or '', PTX text) of a .ptx file or a dynaspa OpenCL program cache file."""
    b = open(path, "rb").read()
    if not path.endswith(".clbin"):
        return "", b.decode(errors="replace")
    # magic, key length, key text (build options among its lines), checksum, program binary
    for at in range(32):
        klen = struct.unpack("<I", b[at:at + 4])[0]
        key = b[at + 4:at + 4 + klen]
        if 0 < klen < 1 << 20 and key.count(b"\n") >= 3:
            try:
                return key.decode(), b[at + 4 + klen + 8:].decode(errors="replace")
            except UnicodeDecodeError:
                continue
    sys.exit(f"{path}: no cache key found")


def cmd_ptx_ops(a):
    for path in a.files:
        key, ptx = ptx_of(path)
        m = re.search(r"\.entry\s+" + a.entry + r"\b.*?\n}\n", ptx, re.S)
        if not m:
            print(f"{path}: no entry {a.entry}")
            continue
        ops = collections.Counter()
        for line in m.group(0).split("\n"):
            line = line.strip().lstrip("@!%p0123456789 ")
            if not line or line.startswith(("//", ".", "{", "}", "$")) or line.endswith(":"):
                continue
            ops[line.split()[0].rstrip(";")] += 1
        print(os.path.basename(path), key.split("\n")[1] if key else "")
        print("  total", sum(ops.values()), " ".join(f"{k}:{v}" for k, v in ops.most_common(30)))


# ---------------------------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="our bench, then PyTorch on the same masks, then the table")
    r.add_argument("--bench", default=BENCH_BIN)
    r.add_argument("--backend", default="cuda")
    r.add_argument("--device")
    r.add_argument("--out", default=os.path.join(ROOT, "target", "bench", "ops"))
    r.add_argument("--masks-file", help="mask dataset (.dsm) the bench shapes its masks from")
    r.add_argument("--batches")
    r.add_argument("--densities")
    r.add_argument("--only")
    r.add_argument("--knobs", type=int, default=0)
    r.add_argument("--schedules")
    r.add_argument("--samples", type=int, default=15)
    r.add_argument("--runs", dest="runs_per_sample", type=int, default=10, help="launches per sample")
    r.add_argument("--fused-finish", choices=("on", "off", "both"))
    r.add_argument("--env", action="append", help="NAME=VALUE for the bench only (repeatable)")
    r.add_argument("--no-torch", action="store_true")
    r.add_argument("--torch-runs", type=int, default=100)

    t = sub.add_parser("torch", help="PyTorch's cuDNN and gather-conv-scatter on dumped masks")
    t.add_argument("--masks", required=True)
    t.add_argument("--batches", default="1,2,4")
    t.add_argument("--blocks", default="4,8")
    t.add_argument("--runs", type=int, default=200)
    t.add_argument("--warmup", type=int, default=20)
    t.add_argument("--only", default="")
    t.add_argument("--json")

    at = sub.add_parser("attention", help="PyTorch's attention on A-ViT's dumped token masks")
    at.add_argument("--masks", required=True)
    at.add_argument("--runs", type=int, default=200)
    at.add_argument("--warmup", type=int, default=20)
    at.add_argument("--only", default="")
    at.add_argument("--json")

    tb = sub.add_parser("table", help="our bench's rows joined with PyTorch's")
    tb.add_argument("ours")
    tb.add_argument("torch", nargs="?")
    tb.add_argument("--fused-finish", choices=("on", "off"))

    ab = sub.add_parser("ab", help="two bench runs side by side, member by member")
    ab.add_argument("runs", nargs="+")

    rk = sub.add_parser("rank", help="the fastest members with the work-groups they launch")
    rk.add_argument("ours")
    rk.add_argument("--top", type=int, default=12)

    de = sub.add_parser("dense", help="our dense member with cuDNN off / timed / forced against PyTorch")
    de.add_argument("--bench", default=BENCH_BIN)
    de.add_argument("--rounds", type=int, default=2)
    de.add_argument("--out", default=os.path.join(ROOT, "target", "bench", "dense"))

    lf = sub.add_parser("launch-floor", help="what one kernel costs PyTorch, eager and in a CUDA graph")
    lf.add_argument("--n", type=int, default=200)
    lf.add_argument("--samples", type=int, default=31)

    fl = sub.add_parser("floor", help="the hand-written one-launch conv1x1 on dumped masks")
    fl.add_argument("--masks", required=True)
    fl.add_argument("--batches", default="1,2,4")
    fl.add_argument("--density", type=float, default=0.1)
    fl.add_argument("--frames", type=int, default=1000)
    fl.add_argument("--variant", help="only this tile, e.g. co64_ct8_w8 (for a profiler)")
    fl.add_argument("--arch", default="sm_90")
    fl.add_argument("--build-dir", default=os.path.join(ROOT, "target", "bench"))

    nv = sub.add_parser("nvrtc", help="registers and spills of a shared kernel source under NVRTC")
    nv.add_argument("source")
    nv.add_argument("-D", "--define", action="append", default=[], metavar="NAME=VALUE")
    nv.add_argument("--arch", default="sm_90")
    nv.add_argument("--out", help="write PREFIX.ptx and PREFIX.cubin")
    nv.add_argument("--nvrtc-lib")

    po = sub.add_parser("ptx-ops", help="PTX instruction counts of one kernel entry")
    po.add_argument("files", nargs="+")
    po.add_argument("--entry", default="sparse_conv_gemm_f32")

    a = p.parse_args()
    if hasattr(a, "batches") and a.cmd in ("torch",):
        a.batches = [int(b) for b in a.batches.split(",")]
    if a.cmd == "torch":
        a.blocks = [int(b) for b in a.blocks.split(",")]
    {"run": cmd_run, "torch": cmd_torch, "attention": cmd_attention, "table": cmd_table, "ab": cmd_ab,
     "rank": cmd_rank, "dense": cmd_dense, "launch-floor": cmd_launch_floor, "floor": cmd_floor,
     "nvrtc": cmd_nvrtc, "ptx-ops": cmd_ptx_ops}[a.cmd](a)


if __name__ == "__main__":
    main()
