"""The PyTorch side of `benches/suite.py gpu`: each suite model rebuilt from its architecture and
the state_dict `suite.py export` saved, timed eager, replayed as one CUDA graph and compiled with
torch.compile(mode="reduce-overhead"), on inputs already on the device; CUDA events on a GPU."""
import copy
import os
import time

import statistics
import sys

import numpy as np

import suite_models as sm

OUT = os.path.join(sm.ROOT, "target", "suite")


def medians(times):
    """times[round][input] -> median over inputs of each input's median over rounds."""
    return statistics.median(statistics.median(col) for col in zip(*times))


def log(msg):
    print(f"suite: {msg}", file=sys.stderr, flush=True)


def torch_module(meta, name, device, repo=None):
    import torch
    m = sm.architecture(name, repo or meta.get("dynconv_repo") or None)
    m.load_state_dict(torch.load(os.path.join(OUT, f"{name}.pt"), map_location="cpu"))
    return m.eval().to(device)


def time_torch(torch, fn, inputs, rounds, warmup, cuda):
    """fn(i) runs input i; returns the median over inputs of per-input medians (ms)."""
    for _ in range(warmup):
        for i in range(len(inputs)):
            fn(i)
    if cuda:
        torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        row = []
        for i in range(len(inputs)):
            if cuda:
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                fn(i)
                e.record()
                e.synchronize()
                row.append(s.elapsed_time(e))
            else:
                t = time.perf_counter()
                fn(i)
                row.append((time.perf_counter() - t) * 1e3)
        times.append(row)
    return medians(times)


def capturable(model):
    """Makes the authors' DynConv capturable as a CUDA graph, keeping its arithmetic: their
    ExpandMask builds its dilation kernels in every forward, setting one element from a Python
    scalar (a host-to-device copy, which capture refuses). Here each ExpandMask builds them once
    per device, on its first (warm-up) call, and reuses them. Returns how many were changed."""
    import torch.nn.functional as F
    changed = 0
    for m in model.modules():
        if type(m).__name__ != "ExpandMask":
            continue
        cache = {}

        def forward(x, m=m, build=m.forward, cache=cache):
            if x.device not in cache:
                build(x)  # sets m.pad_kernel (stride > 1) and m.dilate_kernel
                cache[x.device] = (getattr(m, "pad_kernel", None), m.dilate_kernel)
            pad, dilate = cache[x.device]
            x = x.float()
            if m.stride > 1:
                x = F.conv_transpose2d(x, pad, stride=m.stride, groups=x.size(1))
            return F.conv2d(x, dilate, padding=m.padding, stride=1) > 0.5
        m.forward = forward
        changed += 1
    return changed


def cuda_graph(a, torch, model, ins, name):
    """The forward captured once as a CUDA graph (warm-up on a side stream, as benches/models.py
    does) and replayed per input, each input copied into the captured input buffers first."""
    try:
        if capturable(model):
            log(f"{name}: CUDA graph: ExpandMask's dilation kernels built once before capture")
        static = [t.clone() for t in ins[0]]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(*static)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = model(*static)
        outs = [out] if isinstance(out, torch.Tensor) else list(out)

        def replay(i):
            for s, t in zip(static, ins[i]):
                s.copy_(t)
            g.replay()

        # The frame as a deployment runs it: inputs from pinned host memory, outputs back to
        # pinned host memory, the host waiting for them (wall time, as dynaspa's frames).
        host_ins = [[t.cpu().pin_memory() for t in i] for i in ins]
        host_outs = [torch.empty(o.shape, dtype=o.dtype, pin_memory=True) for o in outs]

        def replay_io(i):
            for s, t in zip(static, host_ins[i]):
                s.copy_(t, non_blocking=True)
            g.replay()
            for h, o in zip(host_outs, outs):
                h.copy_(o, non_blocking=True)
            torch.cuda.current_stream().synchronize()
        return {"graph_ms": time_torch(torch, replay, ins, a.rounds, 2, True),
                "graph_io_ms": time_torch(torch, replay_io, ins, a.rounds, 2, False)}
    except Exception as e:  # a forward that syncs with the host cannot be captured
        note = f"capture failed: {str(e).splitlines()[0][:200] if str(e) else type(e).__name__}"
        log(f"{name}: CUDA graph: {note}")
        return {"graph_ms": None, "graph_note": note}


def half_channels_last(torch, model, ins):
    """The model and its inputs as PyTorch deploys fp16 on a GPU: channels-last, half weights and
    float inputs; a module whose forward casts to float itself (a mask's `.float()` meeting half
    weights) runs in fp32 weights under autocast to fp16 instead. Returns (module, inputs, how)."""

    def layout(t):
        return t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t

    ins_cl = [[layout(t) for t in i] for i in ins]
    half = copy.deepcopy(model).half().to(memory_format=torch.channels_last)
    half_ins = [[t.half() if t.is_floating_point() else t for t in i] for i in ins_cl]
    try:
        half(*half_ins[0])
        return half, half_ins, "half"
    except RuntimeError as e:
        log(f"half weights: {str(e).splitlines()[0][:120]}; autocast to fp16 instead")

    class Autocast(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *xs):
            # No weight-cast cache: a CUDA graph captures the casts too.
            with torch.autocast(ins[0][0].device.type, dtype=torch.float16, cache_enabled=False):
                return self.inner(*xs)
    return Autocast(model.to(memory_format=torch.channels_last)), ins_cl, "autocast"


def torch_side(a, meta, name, xs, extra, device, half=False):
    """PyTorch eager, CUDA graph and compiled timings (in half and channels-last with `half`);
    eager's first output per input in fp32, the reference either way."""
    import torch
    cuda = device.type == "cuda"
    res = {}
    model = torch_module(meta, name, device, a.dynconv_repo)
    ins = [[torch.from_numpy(x).to(device)] + [torch.from_numpy(extra[k][0]).to(device) for k in meta["inputs"][1:]]
           for x in xs]
    first = lambda o: o if isinstance(o, torch.Tensor) else o[0]  # noqa: E731
    with torch.no_grad():
        refs = [first(model(*i)).float().cpu().numpy() for i in ins]
        if half:
            model, ins, res["torch_fp16"] = half_channels_last(torch, model, ins)
            res["torch_vs_fp32_rel_l2"] = max(
                float(np.linalg.norm(first(model(*i)).float().cpu().numpy() - r) / max(np.linalg.norm(r), 1e-30))
                for i, r in zip(ins, refs))
        res["eager_ms"] = time_torch(torch, lambda i: model(*ins[i]), ins, a.rounds, 2, cuda)
        if cuda:
            res.update(cuda_graph(a, torch, model, ins, name))
        else:
            res["graph_ms"], res["graph_note"] = None, f"skipped on {device.type}"
    res["compile_ms"] = None
    if not a.compile:
        res["compile_note"] = "not asked (--compile)"
    else:
        try:
            t = time.time()
            compiled = torch.compile(model, mode="reduce-overhead")
            with torch.no_grad():
                for _ in range(3):
                    for i in ins:
                        compiled(*i)
                res["compile_s"] = round(time.time() - t, 1)
                res["compile_ms"] = time_torch(torch, lambda i: compiled(*ins[i]), ins, a.rounds, 1, cuda)
        except Exception as e:
            res["compile_note"] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            log(f"{name}: torch.compile: {res['compile_note']}")
        torch._dynamo.reset()
    del model
    if cuda:
        torch.cuda.empty_cache()
    return res, refs


def kernel_table(meta, name, xs, extra, top):
    """Where PyTorch's eager frame goes on the GPU: every CUDA kernel of a forward, from the
    profiler, summed per kernel name (µs per frame, slowest first), and the frame's sum."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    model = torch_module(meta, name, torch.device("cuda"))
    ins = [[torch.from_numpy(x).cuda()] + [torch.from_numpy(extra[k][0]).cuda() for k in meta["inputs"][1:]] for x in xs]
    with torch.no_grad():
        for i in ins * 2:
            model(*i)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in ins:
                model(*i)
            torch.cuda.synchronize()
    per = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            n, us = per.get(e.name, (0, 0.0))
            per[e.name] = (n + 1, us + e.device_time)
    rows = sorted(((us / len(ins), n / len(ins), k) for k, (n, us) in per.items()), reverse=True)
    total = sum(r[0] for r in rows)
    print(f"PyTorch eager {name}: GPU kernel time {total:.1f} µs per frame, {sum(r[1] for r in rows):.0f} kernels")
    for us, n, k in rows[:top]:
        print(f"  {us:9.1f} µs {n:5.1f}x  {k[:110]}")
    del model
    torch.cuda.empty_cache()
    return total
