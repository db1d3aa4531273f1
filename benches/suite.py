#!/usr/bin/env python3
"""The whole-model suite: real frames through whole models, dynaspa sparse and dense against the
engine a user would deploy instead, one table per machine.

    python3 benches/suite.py export [--only M,...] [--dynconv-repo DIR]
    python3 benches/suite.py cpu [--only M,...] [--threads 1,2,all] [--frames 16] [--rounds 5]
    python3 benches/suite.py gpu [--only M,...] [--batch 1,8] [--backends cuda,opencl] [--precision f32,f16]
                                 [--frames 10] [--rounds 5] [--compile] [--torch-device cuda|cpu]
                                 [--dynconv-repo DIR]

export  builds and calibrates every suite model (benches/suite_models.py lists them), saves its
        state_dict (<name>.pt) and its ONNX export from that same module (<name>.onnx; the
        authors' DynConv, exported stock with fixed shapes, also <name>_b8.onnx) under
        target/suite/, with <name>.json (input size, normalisation, files, checks). Writes the
        frames every size needs (target/suite/frames/WxH/: the committed vtest JPEGs resized once
        with Pillow bilinear and stored as PNG, so dynaspa, ONNX Runtime and PyTorch read identical
        pixels and normalise them the same way), checks ONNX Runtime against PyTorch on 4 frames
        (relative L2 <= 1e-4 on every output) and prints each sparse model's mask density on the
        first 16 frames.
cpu     per model and thread count T: ONNX Runtime (CPUExecutionProvider, ORT_ENABLE_ALL, intra-op
        T, inter-op 1, sequential) on the first --frames frames, --rounds rounds after one warm-up
        pass, then `dynaspa bench --backend cpu --threads T` on the same frames (its sparse session
        and the same graph run dense, interleaved). Each engine's figure is the median over frames
        of each frame's median over rounds. Batch 1.
gpu     per model, batch size and backend: `dynaspa bench --backend B --batch N` on --frames runs
        of N consecutive frames, then PyTorch on the same tensors (stacked to the batch, resident on
        the GPU): eager, replayed as one CUDA graph (captured as benches/models.py does) and, with
        --compile, torch.compile(mode="reduce-overhead"); TF32 off, cudnn.benchmark on; CUDA
        events, medians as above after warm-up. Per --precision: f32 as is; f16 runs `dynaspa bench
        --precision f16` and PyTorch's model and inputs in half, channels-last (its fp16
        deployment), with every f16 row's error taken against PyTorch eager in fp32.
        --torch-device cpu runs the PyTorch side on the CPU (no CUDA graph; --compile compiles for
        the CPU), for trying the harness without a GPU.

Every row also gives the largest relative L2 between dynaspa's sparse outputs and the reference
engine's (ONNX Runtime on the CPU, PyTorch eager on the GPU) over the frames. The PyTorch side
is benches/suite_torch.py. Rows are appended
as JSON lines to --json (target/suite/results.jsonl) and the table is written as Markdown to
--md (target/suite/<target>.md) for benches/RESULTS.md.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import suite_models as sm  # noqa: E402
import suite_torch  # noqa: E402
from bench_common import cpu_name  # noqa: E402
from suite_torch import medians  # noqa: E402
from suite_models import calib, common  # noqa: E402

OUT = os.path.join(ROOT, "target", "suite")
DYNASPA = os.path.join(ROOT, "target", "release", "dynaspa")
VTEST = os.path.join(ROOT, "models", "frames", "vtest")
CHECK_FRAMES = 4
DENSITY_FRAMES = 16
T0 = time.time()


def log(msg):
    print(f"[{time.time() - T0:7.1f} s] {msg}", flush=True)



# ------------------------------------------------------------------------------------------------
# Frames
# ------------------------------------------------------------------------------------------------
def frame_dir(w, h):
    """The vtest frames at w x h as PNG (written once; Pillow bilinear, as models/ resizes)."""
    d = os.path.join(OUT, "frames", f"{w}x{h}")
    src = sorted(f for f in os.listdir(VTEST) if f.endswith(".jpg"))
    if not os.path.isdir(d) or len(os.listdir(d)) < len(src):
        from PIL import Image
        os.makedirs(d, exist_ok=True)
        for f in src:
            arr = common.load_u8(os.path.join(VTEST, f))
            if arr.shape[:2] != (h, w):
                arr = common.resize_u8(arr, w, h)
            Image.fromarray(arr, "RGB").save(os.path.join(d, f[:-4] + ".png"))
    return d


def frames(meta, n):
    """The first n frames of the model's size, normalised as dynaspa does it from the model's
    metadata: (u8 / 255 - mean) / std in float32, NCHW, one [1, 3, H, W] array each."""
    from PIL import Image
    d = frame_dir(meta["w"], meta["h"])
    files = sorted(os.listdir(d))[:n]
    mean, std = (np.array(meta[k], np.float32) for k in ("mean", "std"))
    out = []
    for f in files:
        x = np.asarray(Image.open(os.path.join(d, f)).convert("RGB"), np.uint8).astype(np.float32) / np.float32(255.0)
        out.append(np.ascontiguousarray(((x - mean) / std).transpose(2, 0, 1)[None]))
    return out


def batches(meta, runs, batch):
    xs = frames(meta, runs * batch)
    if len(xs) < runs * batch:
        sys.exit(f"suite: {runs} runs of {batch} need {runs * batch} frames; there are {len(xs)}")
    return [np.concatenate(xs[i * batch:(i + 1) * batch]) for i in range(runs)]


# ------------------------------------------------------------------------------------------------
# Models on disk
# ------------------------------------------------------------------------------------------------
def meta_path(name):
    return os.path.join(OUT, f"{name}.json")


def load_meta(name):
    p = meta_path(name)
    if not os.path.exists(p):
        sys.exit(f"suite: {name} is not exported: python3 benches/suite.py export --only {name} [--dynconv-repo DIR]")
    with open(p) as f:
        return json.load(f)


def onnx_file(meta, batch):
    """(ONNX file, the batch to pass to `dynaspa bench --batch`) for a batch size."""
    files = meta["onnx"]
    return os.path.join(OUT, files.get(str(batch)) or files["*"])


def extra_feeds(meta, batch):
    """Inputs besides the frames (SIGE's mask) as {name: (array, .npy path)}."""
    out = {}
    for k, v in meta.get("extra_inputs", {}).items():
        p = os.path.join(OUT, v.format(batch=batch))
        if not os.path.exists(p):
            np.save(p, sm.sige_mask(batch))
        out[k] = (np.load(p), p)
    return out


def mask_density(meta, onnx_path, xs, extra):
    """Mean hard-mask density over frames: the thresholded mask tensors in the graph
    (calib.mask_values) whose threshold is the model's mask threshold; SIGE: its input mask."""
    import onnx
    if not meta["sparse"]:
        return None
    if "mask" in extra:
        return float(extra["mask"][0].mean())
    m = onnx.load(onnx_path, load_external_data=False)
    # The masks: DynConv's thresholds at 0 (the authors' dilation thresholds at 0.5 are left out),
    # A-ViT's still-running tokens (Less than 1 - eps).
    mv = [t for t in calib.mask_values(m) if t[1] == 0.0 or (t[4] == "Less" and abs(t[1] - 0.99) < 1e-6)]
    sess = common.ort_session(onnx_path, extra_outputs=[t[3] for t in mv])
    first = sess.get_outputs()[0].name
    dens = []
    for x in xs:
        res = sess.run([first] + [t[3] for t in mv], {"input": x})[1:]
        # A-ViT's run masks are [B, tokens]; token 0 is the class token, which never halts.
        dens.append(np.mean([float(np.asarray(r, np.float32)[..., 1:].mean() if r.ndim == 2 else
                                   np.asarray(r, np.float32).mean()) for r in res]))
    return float(np.mean(dens))


def cmd_export(a):
    import torch
    torch.set_num_threads(os.cpu_count() or 1)
    os.makedirs(OUT, exist_ok=True)
    for name in a.only:
        spec = sm.SPECS[name]
        t = time.time()
        log(f"{name}: building and calibrating ({spec['h']}x{spec['w']})")
        module, props, in_names, out_names = sm.build(name, a.dynconv_repo)
        module.eval()
        torch.save(module.state_dict(), os.path.join(OUT, f"{name}.pt"))
        props = {k: str(v) for k, v in props.items()}
        meta = {"name": name, "h": spec["h"], "w": spec["w"], "sparse": spec["sparse"],
                "mean": [float(v) for v in props["dynaspa.mean"].split(",")],
                "std": [float(v) for v in props["dynaspa.std"].split(",")],
                "inputs": in_names, "outputs": out_names, "dynconv_repo": a.dynconv_repo}
        xs = frames(meta, max(CHECK_FRAMES, DENSITY_FRAMES, 8))
        if "mask" in in_names:
            meta["extra_inputs"] = {"mask": "sige_mask_b{batch}.npy"}
        sizes = [1] if spec["batch"] == "symbolic" else [1, 8]
        meta["onnx"] = {"*": f"{name}.onnx"} if spec["batch"] == "symbolic" else \
            {str(b): f"{name}.onnx" if b == 1 else f"{name}_b{b}.onnx" for b in sizes}
        checks = {}
        for b in sizes:
            path = onnx_file(meta, b)
            extra = extra_feeds(meta, b)
            x = np.concatenate(xs[:b])
            sm.export(module, name, path, [x] + [extra[k][0] for k in in_names[1:]], in_names, out_names, props, b)
            # ONNX Runtime against PyTorch: CHECK_FRAMES single frames (batch 1) or one batch.
            sess = common.ort_session(path, optimize=True)
            cases = [xs[i] for i in range(CHECK_FRAMES)] if b == 1 else [x]
            worst = 0.0
            for c in cases:
                feeds = {"input": c, **{k: extra[k][0] for k in in_names[1:]}}
                got = sess.run(None, feeds)
                with torch.no_grad():
                    ref = module(*[torch.from_numpy(feeds[k]) for k in in_names])
                ref = [ref] if isinstance(ref, torch.Tensor) else list(ref)
                worst = max(worst, max(common.rel_l2(g, r.numpy()) for g, r in zip(got, ref)))
            checks[str(b)] = worst
            status = "ok" if worst <= 1e-4 else "FAILED (limit 1e-4)"
            log(f"{name}: {os.path.relpath(path, ROOT)} ({os.path.getsize(path) / 1e6:.1f} MB): ONNX Runtime vs "
                f"PyTorch on {len(cases)} x batch {b}: max relative L2 {worst:.1e} {status}")
            if worst > 1e-4:
                sys.exit(1)
        extra = extra_feeds(meta, 1)
        meta["density"] = mask_density(meta, onnx_file(meta, 1), xs[:DENSITY_FRAMES], extra)
        meta["ort_vs_pytorch_rel_l2"] = checks
        meta["export_s"] = round(time.time() - t, 1)
        with open(meta_path(name), "w") as f:
            json.dump(meta, f, indent=1)
            f.write("\n")
        d = "dense model" if meta["density"] is None else f"mask density {meta['density']:.3f} on the first {DENSITY_FRAMES} frames"
        log(f"{name}: {d}; export took {meta['export_s']:.0f} s")


# ------------------------------------------------------------------------------------------------
# dynaspa bench
# ------------------------------------------------------------------------------------------------
def run_bench(a, meta, backend, batch, runs, out_dir, threads=None, precision="f32"):
    path = onnx_file(meta, batch)
    cmd = [a.dynaspa, "bench", path, "--frames", frame_dir(meta["w"], meta["h"]), "--backend", backend,
           "--rounds", str(a.rounds), "--max-frames", str(runs * batch), "--batch", str(batch),
           "--output-dir", out_dir, "--precision", precision]
    for k, (_, p) in extra_feeds(meta, batch).items():
        cmd += ["--input", f"{k}={p}"]
    if threads:
        cmd += ["--threads", str(threads)]
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"suite: {' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}", file=sys.stderr, flush=True)
        return None
    out = r.stdout
    m = re.search(r"^\s+median\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(\S+)\s*$", out, re.M)
    s = re.search(r"speedup_vs_dense: ([0-9.]+)", out)
    if not (m and s):
        print(f"suite: could not read dynaspa bench's output:\n{out}", file=sys.stderr, flush=True)
        return None
    dev = re.search(r"^device time per \w+ \(median\): dense ([0-9.]+) ms, sparse ([0-9.]+) ms", out, re.M)
    agree = re.search(r"outputs agree: max relative L2 (\S+)", out)
    warn = re.search(r"sparse and dense outputs differ: relative L2 (\S+)", r.stderr)
    return {"dense_ms": float(m.group(1)), "sparse_ms": float(m.group(2)), "speedup_vs_dense": float(s.group(1)),
            "op_density": None if m.group(4) == "-" else float(m.group(4)),
            "dense_device_ms": float(dev.group(1)) if dev else None, "sparse_device_ms": float(dev.group(2)) if dev else None,
            "sparse_vs_dense_rel_l2": float((agree or warn).group(1)) if (agree or warn) else None,
            "bench_s": round(time.time() - t, 1), "command": " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd)}


def ours_vs(out_dir, refs, out_name):
    """Largest relative L2 of dynaspa's first output (run i in out_dir/i/) against refs[i]."""
    fname = re.sub(r"[^A-Za-z0-9._-]", "_", out_name) + ".npy"
    worst = 0.0
    for i, ref in enumerate(refs):
        p = os.path.join(out_dir, str(i), fname)
        if not os.path.exists(p):
            return None
        err = common.rel_l2(np.load(p), ref)
        if not np.isfinite(err):
            return float("nan")  # max() would keep 0.0 over a NaN
        worst = max(worst, err)
    return worst


# ------------------------------------------------------------------------------------------------
# CPU: dynaspa against ONNX Runtime
# ------------------------------------------------------------------------------------------------
def ort_cpu(path, feeds_list, threads, rounds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    first = sess.get_outputs()[0].name
    refs = [sess.run([first], f)[0] for f in feeds_list]  # warm-up pass, and the reference outputs
    times = []
    for _ in range(rounds):
        row = []
        for f in feeds_list:
            t = time.perf_counter()
            sess.run(None, f)
            row.append((time.perf_counter() - t) * 1e3)
        times.append(row)
    return medians(times), refs, first


def cmd_cpu(a):
    import onnxruntime as ort
    ncpu = os.cpu_count() or 1
    threads = sorted({ncpu if t == "all" else int(t) for t in a.threads.split(",")})
    rows = []
    for name in a.only:
        meta = load_meta(name)
        xs = frames(meta, a.frames)
        extra = extra_feeds(meta, 1)
        feeds = [{"input": x, **{k: v[0] for k, v in extra.items()}} for x in xs]
        path = onnx_file(meta, 1)
        for t in threads:
            log(f"{name}: {t} threads: ONNX Runtime, {len(xs)} frames x {a.rounds} rounds")
            ort_ms, refs, first = ort_cpu(path, feeds, t, a.rounds)
            log(f"{name}: {t} threads: dynaspa bench (sparse and dense)")
            out_dir = os.path.join(OUT, "out", f"cpu_{name}_t{t}")
            b = run_bench(a, meta, "cpu", 1, len(xs), out_dir, threads=t)
            row = {"target": "cpu", "model": name, "threads": t, "batch": 1, "frames": len(xs), "rounds": a.rounds,
                   "mask_density": meta["density"], "ort_ms": ort_ms, "ort": ort.__version__, "cpu": cpu_name(),
                   "date": str(datetime.date.today())}
            if b:
                row.update(b)
                row["sparse_vs_ort_rel_l2"] = ours_vs(out_dir, refs, first)
            rows.append(row)
            emit(a, row)
            print_table(CPU_HEAD, CPU_WIDTHS, cpu_cells, rows[-1:], header=len(rows) == 1)
    print()
    print_table(CPU_HEAD, CPU_WIDTHS, cpu_cells, rows, header=True)
    write_md(a, "cpu", markdown(CPU_HEAD, cpu_cells, rows))


def fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def cpu_cells(r):
    s, d, o = r.get("sparse_ms"), r.get("dense_ms"), r["ort_ms"]
    return [r["model"], str(r["threads"]), fmt(r["mask_density"], ".3f"), fmt(r.get("op_density"), ".3f"),
            fmt(s, ".2f"), fmt(d, ".2f"), fmt(o, ".2f"), fmt(d / s if s and d else None),
            fmt(d / o if d else None), fmt(o / s if s else None), fmt(r.get("sparse_vs_ort_rel_l2"), ".1e")]


def print_table(head, widths, cells, rows, header):
    """Rows as fixed-width text columns, the first left-aligned."""
    line = lambda cols: " ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cols, widths)))
    if header:
        print(line(head), flush=True)
    for r in rows:
        print(line(cells(r)), flush=True)


def markdown(head, cells, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(cells(r)) + " |" for r in rows]
    return "\n".join(lines)


CPU_WIDTHS = [18, 3, 7, 6, 10, 10, 10, 12, 10, 10, 12]
GPU_WIDTHS = [18, 5, 7, 5, 6, 6, 9, 9, 13, 12, 12, 9, 9, 11, 10, 12, 15, 11, 14, 17]
CPU_HEAD = ["model", "T", "mask d", "op d", "sparse ms", "dense ms", "ORT ms", "dense/sparse", "dense/ORT",
            "ORT/sparse", "relL2 vs ORT"]






# ------------------------------------------------------------------------------------------------
# GPU: dynaspa against PyTorch
# ------------------------------------------------------------------------------------------------
def cmd_gpu(a):
    import torch
    device = torch.device(a.torch_device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            sys.exit("suite: CUDA is not available to PyTorch (--torch-device cpu tries the harness without it)")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        dev_name = torch.cuda.get_device_name(0)
    else:
        torch.set_num_threads(os.cpu_count() or 1)
        dev_name = cpu_name()
    rows = []
    for name in a.only:
        meta = load_meta(name)
        for b in [int(v) for v in a.batch.split(",")]:
            xs = batches(meta, a.frames, b)
            extra = extra_feeds(meta, b)
            refs = None
            for prec in a.precision.split(","):
                benches = {}
                for backend in a.backends.split(","):
                    log(f"{name} batch {b} {prec}: dynaspa bench --backend {backend}, {a.frames} runs x {a.rounds} rounds")
                    out_dir = os.path.join(OUT, "out", f"gpu_{name}_b{b}_{backend}_{prec}")
                    benches[backend] = (run_bench(a, meta, backend, b, a.frames, out_dir, precision=prec), out_dir)
                log(f"{name} batch {b} {prec}: PyTorch on {device.type}")
                tr, fp32_refs = suite_torch.torch_side(a, meta, name, xs, extra, device, half=prec == "f16")
                refs = refs or fp32_refs
                gpu_rows(a, rows, name, meta, b, prec, benches, tr, refs, dev_name, device, torch)
    print()
    print_table(GPU_HEAD, GPU_WIDTHS, gpu_cells, rows, header=True)
    write_md(a, "gpu", markdown(GPU_HEAD, gpu_cells, rows))


def gpu_rows(a, rows, name, meta, b, prec, benches, tr, refs, dev_name, device, torch):
    """One row per backend of one model, batch and precision, printed and appended to --json."""
    for backend, (bench, out_dir) in benches.items():
        row = {"target": "gpu", "model": name, "batch": b, "backend": backend, "precision": prec, "runs": a.frames,
               "rounds": a.rounds, "mask_density": meta["density"], "device": dev_name,
               "torch": torch.__version__, "torch_device": device.type, "date": str(datetime.date.today()), **tr}
        if device.type == "cuda":
            row["cudnn"] = torch.backends.cudnn.version()
        if bench:
            row.update(bench)
            row["sparse_vs_torch_rel_l2"] = ours_vs(out_dir, refs, meta["outputs"][0])
        rows.append(row)
        emit(a, row)
        print_table(GPU_HEAD, GPU_WIDTHS, gpu_cells, rows[-1:], header=len(rows) == 1)


def cmd_profile(a):
    """Where a frame goes on the GPU: dynaspa's steps (device time per step, sparse and the same
    graph dense) and PyTorch's eager kernels, one model after the other."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    for name in a.only:
        meta = load_meta(name)
        path = onnx_file(meta, 1)
        for label, env in (("sparse", {}), ("dense", {"DYNASPA_FORCE_MEMBER": "dense"})):
            cmd = [a.dynaspa, "profile", path, "--frames", frame_dir(meta["w"], meta["h"]), "--backend", a.backend,
                   "--max-frames", str(a.frames), "--nodes", str(a.top)]
            for k, (_, p) in extra_feeds(meta, 1).items():
                cmd += ["--input", f"{k}={p}"]
            r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
            print(f"==== dynaspa {label}: {' '.join(cmd)}\n{r.stdout}{r.stderr[-2000:] if r.returncode else ''}", flush=True)
        xs = frames(meta, a.frames)
        print(f"==== PyTorch {name}", flush=True)
        suite_torch.kernel_table(meta, name, xs, extra_feeds(meta, 1), a.top)


GPU_HEAD = ["model", "batch", "backend", "prec", "mask d", "op d", "sparse ms", "dense ms", "sparse dev ms", "dense dev ms", "sparse/dense", "eager ms",
            "graph ms", "graph+io ms", "compile ms", "graph/sparse", "graph+io/sparse", "graph/dense", "relL2 vs torch",
            "torch f16 vs fp32"]


def gpu_cells(r):
    s, d, g, gio = r.get("sparse_ms"), r.get("dense_ms"), r.get("graph_ms"), r.get("graph_io_ms")
    return [r["model"], str(r["batch"]), r["backend"], r.get("precision", "f32"), fmt(r["mask_density"], ".3f"), fmt(r.get("op_density"), ".3f"),
            fmt(s, ".3f"), fmt(d, ".3f"), fmt(r.get("sparse_device_ms"), ".3f"), fmt(r.get("dense_device_ms"), ".3f"),
            fmt(s / d if s and d else None), fmt(r.get("eager_ms"), ".3f"),
            fmt(g, ".3f"), fmt(gio, ".3f"), fmt(r.get("compile_ms"), ".3f"), fmt(g / s if g and s else None),
            fmt(gio / s if gio and s else None), fmt(g / d if g and d else None), fmt(r.get("sparse_vs_torch_rel_l2"), ".1e"),
            fmt(r.get("torch_vs_fp32_rel_l2"), ".1e")]


# ------------------------------------------------------------------------------------------------
def emit(a, row):
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    with open(a.json, "a") as f:
        f.write(json.dumps(row) + "\n")


def write_md(a, target, table):
    path = a.md or os.path.join(OUT, f"{target}.md")
    cmd = "python3 benches/suite.py " + " ".join(sys.argv[1:])
    with open(path, "w") as f:
        f.write(f"`{cmd}` ({datetime.date.today()}, {time.time() - T0:.0f} s)\n\n{table}\n")
    log(f"table written to {os.path.relpath(path, ROOT)}, rows appended to {os.path.relpath(a.json, ROOT)}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export", help="build, calibrate, export and check the suite's models")
    cpu = sub.add_parser("cpu", help="dynaspa's CPU backend against ONNX Runtime")
    gpu = sub.add_parser("gpu", help="dynaspa's GPU backends against PyTorch")
    prof = sub.add_parser("profile", help="where a frame goes on the GPU: dynaspa's steps and PyTorch's kernels")
    for s, default in ((ex, sm.CPU_SUITE), (cpu, sm.CPU_SUITE), (gpu, sm.GPU_SUITE), (prof, sm.GPU_SUITE)):
        s.add_argument("--only", default=",".join(default), help=f"models (default: {','.join(default)})")
        s.add_argument("--dynconv-repo", default="", help="checkout of github.com/thomasverelst/dynconv "
                       "(the authors' models; recorded at export for the PyTorch side)")
    for s, frames, defaults in ((cpu, 16, 5), (gpu, 10, 5), (prof, 10, 1)):
        s.add_argument("--frames", type=int, default=frames, help="frames (gpu: runs of --batch frames each)")
        s.add_argument("--rounds", type=int, default=defaults)
        s.add_argument("--dynaspa", default=DYNASPA)
        s.add_argument("--json", default=os.path.join(OUT, "results.jsonl"))
        s.add_argument("--md", help="Markdown table file (default target/suite/<cpu|gpu>.md)")
    cpu.add_argument("--threads", default="1,2,all", help="thread counts, 'all' = every core")
    gpu.add_argument("--batch", default="1,8")
    gpu.add_argument("--backends", default="cuda", help="dynaspa backends: cuda, opencl (cpu for a dry run)")
    gpu.add_argument("--precision", default="f32", help="f32, f16 or both (f32,f16)")
    gpu.add_argument("--compile", action="store_true", help='also torch.compile(mode="reduce-overhead")')
    gpu.add_argument("--torch-device", default="cuda", choices=["cuda", "cpu"])
    prof.add_argument("--backend", default="cuda")
    prof.add_argument("--top", type=int, default=40, help="rows per table")
    a = p.parse_args()
    a.only = [m for m in a.only.split(",") if m]
    bad = [m for m in a.only if m not in sm.SPECS]
    if bad:
        p.error(f"unknown models {bad}; the suite has {list(sm.SPECS)}")
    if a.dynconv_repo:
        a.dynconv_repo = os.path.abspath(a.dynconv_repo)
    if a.cmd != "export":
        if not os.path.exists(a.dynaspa):
            sys.exit(f"suite: no dynaspa binary at {a.dynaspa}: cargo build --release")
        if a.frames < 1 or a.rounds < 1:
            p.error("--frames and --rounds must be >= 1")
    log(f"suite {a.cmd}: {', '.join(a.only)}")
    {"export": cmd_export, "cpu": cmd_cpu, "gpu": cmd_gpu, "profile": cmd_profile}[a.cmd](a)
    log("done")


if __name__ == "__main__":
    main()
