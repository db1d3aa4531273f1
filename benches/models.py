#!/usr/bin/env python3
"""Whole models against the engines a user would deploy instead: ONNX Runtime on the CPU,
PyTorch (eager, and replayed as a CUDA graph) on an NVIDIA GPU. dynaspa's own side of a GPU
comparison is `dynaspa bench MODEL --frames ... --backend cuda`, run in the same call.

    python3 benches/models.py cpu [--model resnet18 | --onnx FILE] [--input-npy X.npy]
                                  [--threads 2] [--rounds 7] [--runs 20]
    python3 benches/models.py ort MODEL.onnx [--threads 2] [--warmup 5] [--runs 30] [--batch 1]
    python3 benches/models.py torch [--only dynconv,avit,sige] [--runs 50] [--cuda-graph] [--json OUT]
    python3 benches/models.py torch-profile [--runs 20] [--density 0.3]
    python3 benches/models.py export-full [--out target/bench/full]
    python3 benches/models.py sige-mask OUT.npy
    python3 benches/models.py ab --run A=BIN --run B=BIN[:NAME=VALUE,...] [--model M] [--frames DIR]
                                 [--max-frames 60] [--threads 2] [--rounds 9] [--nodes]

cpu          dynaspa's CPU backend against ONNX Runtime on the same ONNX file, same machine, rounds
             interleaved: each round times ONNX Runtime in-process (--runs session.run calls after 3
             warm-ups) and then `dynaspa run --repeat runs+1` (its first run is a warm-up). Reports
             the median over rounds of each round's median, their ratio, the output agreement, and
             a Markdown row for RESULTS.md. --model builds a models/zoo.py model into target/bench/;
             sparse models need a real frame (--input-npy), since their masks follow the content.
ort          ONNX Runtime alone (CPUExecutionProvider, ORT_ENABLE_ALL, intra-op --threads, one
             inter-op thread, sequential) on one fixed random-normal input (seed 0; a symbolic
             first dimension is --batch, any other 1): median / min / p90 ms and a JSON line.
torch        the full-size DynConv (ResNet-50 layout, 224x224), A-ViT (DeiT-S) and SIGE generators
             of models/ in PyTorch with cuDNN, batch 1, fp32, TF32 off, cudnn.benchmark on; their
             masks multiply, they do not skip work. Eager always; with --cuda-graph also each
             forward captured once in a CUDA graph and replayed (the strongest PyTorch baseline).
             Median / min µs over --runs calls (CUDA events) after --warmup.
torch-profile where PyTorch spends the full-size SIGE generator's GPU time (torch.profiler):
             per leaf module, per kernel, per aten op, µs per forward pass.
export-full  writes the full-size ONNX models dynaspa's side runs (models/{dynconv,avit,sige}.py
             --sizes full) and the SIGE edit mask, into --out.
sige-mask    the full-size SIGE edit mask (1x1x168x224, density 0.3, random discs, seed 7) that
             `dynaspa bench ... --input mask=OUT.npy` and `torch` use.
ab           `dynaspa profile` of two or more builds (or environment settings) of the binary,
             rounds alternating with a rotating order: per variant the median over rounds of the
             frame latency, the overhead share and phases of the Table 4 total row, the sparse-op
             time and, with --nodes, every node's median µs.

Results go to benches/RESULTS.md with the command, the device and the date.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time

from bench_common import cpu_name, emit, time_cuda, torch_setup

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DYNASPA = os.path.join(ROOT, "target", "release", "dynaspa")
SIGE_HW = (168, 224)


# ---------------------------------------------------------------------------------------------
# ONNX Runtime on the CPU


def ort_session(path, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def random_feeds(sess, batch, rng):
    import numpy as np
    dtypes = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
              "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(uint8)": np.uint8,
              "tensor(int8)": np.int8, "tensor(bool)": np.bool_}
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else (batch if k == 0 else 1) for k, d in enumerate(i.shape)]
        dt = dtypes.get(i.type)
        if dt is None:
            sys.exit(f"models.py: input {i.name}: unsupported type {i.type}")
        if np.issubdtype(dt, np.floating):
            feeds[i.name] = rng.standard_normal(shape).astype(dt)
        elif dt is np.bool_:
            feeds[i.name] = rng.random(shape) < 0.5
        else:
            feeds[i.name] = rng.integers(0, 2, shape).astype(dt)
    return feeds


def cmd_ort(a):
    import numpy as np
    import onnxruntime as ort
    t0 = time.perf_counter()
    sess = ort_session(a.model, a.threads)
    load_ms = (time.perf_counter() - t0) * 1e3
    feeds = random_feeds(sess, a.batch, np.random.default_rng(0))
    outs = [o.name for o in sess.get_outputs()]
    for _ in range(a.warmup):
        sess.run(outs, feeds)
    times = []
    for _ in range(a.runs):
        t = time.perf_counter()
        sess.run(outs, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    med, mn, p90 = statistics.median(times), min(times), float(np.percentile(times, 90))
    print(f"model      {a.model}")
    print(f"inputs     { {k: list(v.shape) for k, v in feeds.items()} }")
    print(f"ort        {ort.__version__} CPUExecutionProvider, ORT_ENABLE_ALL, intra_op {a.threads}, inter_op 1 "
          f"on {cpu_name()} ({os.cpu_count()} logical CPUs)")
    print(f"runs       {a.runs} after {a.warmup} warm-up (session load {load_ms:.1f} ms)")
    print(f"median     {med:.3f} ms")
    print(f"min        {mn:.3f} ms")
    print(f"p90        {p90:.3f} ms")
    print(json.dumps({"model": os.path.basename(a.model), "engine": "onnxruntime", "ort_version": ort.__version__,
                      "threads": a.threads, "batch": a.batch, "warmup": a.warmup, "runs": a.runs,
                      "median_ms": round(med, 4), "min_ms": round(mn, 4), "p90_ms": round(p90, 4), "cpu": cpu_name()}))


def cmd_cpu(a):
    import numpy as np
    import onnxruntime as ort
    bench_dir = os.path.join(ROOT, "target", "bench")
    os.makedirs(bench_dir, exist_ok=True)
    if a.onnx:
        model, name = a.onnx, os.path.splitext(os.path.basename(a.onnx))[0]
    else:
        model, name = os.path.join(bench_dir, f"{a.model}.onnx"), a.model
        if not os.path.exists(model):
            subprocess.run([sys.executable, os.path.join(ROOT, "models", "zoo.py"), "--out", bench_dir, "--only", a.model], check=True)
    if not os.path.exists(a.dynaspa):
        sys.exit(f"models.py: no dynaspa at {a.dynaspa}: cargo build --release")
    sess = ort_session(model, a.threads)
    inp = sess.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in inp.shape]
    x = np.load(a.input_npy) if a.input_npy else np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    xpath = os.path.join(bench_dir, f"{name}_input.npy")
    np.save(xpath, x)
    ours = [a.dynaspa, "run", model, "--input", f"{inp.name}={xpath}", "--threads", str(a.threads), "--repeat", str(a.runs + 1)]
    ref = sess.run(None, {inp.name: x})[0]
    out_dir = os.path.join(bench_dir, "out")
    subprocess.run(ours + ["--output-dir", out_dir], check=True, capture_output=True)
    first = re.sub(r"[^A-Za-z0-9._-]", "_", sess.get_outputs()[0].name)
    got = np.load(os.path.join(out_dir, f"{first}.npy"))
    rel = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    ort_med, ours_med = [], []
    for r in range(a.rounds):
        for _ in range(3):
            sess.run(None, {inp.name: x})
        ts = []
        for _ in range(a.runs):
            t = time.perf_counter()
            sess.run(None, {inp.name: x})
            ts.append((time.perf_counter() - t) * 1e3)
        ort_med.append(statistics.median(ts))
        out = subprocess.run(ours, check=True, capture_output=True, text=True).stdout
        m = re.search(r"run ([0-9.]+) ms \(median", out)
        if not m:
            sys.exit(f"models.py: could not read dynaspa's output: {out}")
        ours_med.append(float(m.group(1)))
        print(f"round {r}: onnxruntime {ort_med[-1]:.3f} ms, dynaspa {ours_med[-1]:.3f} ms", flush=True)
    o, d = statistics.median(ort_med), statistics.median(ours_med)
    print(f"model {name}, {a.threads} threads, {a.rounds} rounds x {a.runs} runs")
    print(f"onnxruntime {ort.__version__}: median {o:.3f} ms")
    print(f"dynaspa cpu: median {d:.3f} ms (output relative L2 against ONNX Runtime {rel:.1e})")
    print(f"ratio dynaspa/onnxruntime: {d / o:.2f}")
    print(f"| {datetime.date.today()} | {name} b1 | {cpu_name()}, {a.threads} threads | ORT {ort.__version__} {o:.3f} ms | "
          f"dynaspa {d:.3f} ms | {d / o:.2f}x |")


# ---------------------------------------------------------------------------------------------
# PyTorch on the GPU


def sige_mask():
    import numpy as np
    rng = np.random.default_rng(7)
    h, w = SIGE_HW
    m = np.zeros((1, 1, h, w), np.float32)
    y, x = np.ogrid[:h, :w]
    while m.mean() < 0.3:
        cy, cx, r = rng.integers(0, h), rng.integers(0, w), rng.integers(8, 30)
        m[0, 0][(y - cy) ** 2 + (x - cx) ** 2 < r * r] = 1
    return m


def full_models(torch, only):
    sys.path.insert(0, os.path.join(ROOT, "models"))
    import avit
    import dynconv
    import sige
    cases = []
    if "dynconv" in only:
        cfg = dynconv.CONFIGS["full"]
        m = dynconv.DynConvResNet(cfg)
        dynconv.init_weights(m, dynconv.SEED)
        cases.append(("dynconv_full", m, (torch.randn(1, 3, cfg["h"], cfg["w"]),)))
    if "avit" in only:
        cfg = avit.CONFIGS["full"]
        cases.append(("avit_full", avit.AViT(cfg), (torch.randn(1, 3, cfg["h"], cfg["w"]),)))
    if "sige" in only:
        cfg = sige.CONFIGS["full"]
        cases.append(("sige_full", sige.Generator(cfg), (torch.randn(1, 3, cfg["h"], cfg["w"]), torch.from_numpy(sige_mask()))))
    return cases


def cmd_torch(a):
    torch = torch_setup("models.py")
    dev = torch.device("cuda")
    for name, model, inputs in full_models(torch, a.only.split(",")):
        model = model.to(dev).eval()
        inputs = tuple(t.to(dev) for t in inputs)
        with torch.no_grad():
            us, mn = time_cuda(torch, lambda: model(*inputs), a.runs, a.warmup)
            emit(torch, dict(kind="model", model=name, impl="pytorch-eager", batch=1, us=us, min_us=mn), a.json)
            if not a.cuda_graph:
                continue
            try:
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(3):
                        model(*inputs)
                torch.cuda.current_stream().wait_stream(side)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    model(*inputs)
            except Exception as e:  # a forward that syncs with the host cannot be captured
                print(f"models.py: {name} could not be captured as a CUDA graph: {e}", file=sys.stderr)
                continue
            us, mn = time_cuda(torch, g.replay, a.runs, a.warmup)
            emit(torch, dict(kind="model", model=name, impl="pytorch-cuda-graph", batch=1, us=us, min_us=mn), a.json)


def cmd_torch_profile(a):
    torch = torch_setup("models.py")
    sys.path.insert(0, os.path.join(ROOT, "models"))
    import sige
    from torch.profiler import ProfilerActivity, profile
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
        if not list(mod.children()):
            mod._dyn_name = name
            mod.register_forward_pre_hook(pre)
            mod.register_forward_hook(post)
    with torch.no_grad():
        for _ in range(10):
            m(x, mask)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(a.runs):
                m(x, mask)
            torch.cuda.synchronize()

    def dev_us(e):
        return getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0.0)

    # A record_function range is listed twice (its CPU range and its GPU annotation): keep one.
    merged = {}
    for e in prof.key_averages():
        us, c = dev_us(e) / a.runs, e.count // a.runs
        if e.key not in merged or us > merged[e.key][0]:
            merged[e.key] = (us, c)
    found = [(k, us, c) for k, (us, c) in merged.items()]
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {a.runs} runs")
    print("per module (µs of CUDA time per pass, calls per pass):")
    mods = sorted([r for r in found if r[0].startswith("mod:")], key=lambda r: -r[1])
    for k, us, c in mods:
        print(f"  {k[4:]:<28} {us:9.1f} {c:4d}")
    print(f"  {'sum of modules':<28} {sum(r[1] for r in mods):9.1f}")
    print("per kernel (µs per pass, launches per pass):")
    kern = sorted([r for r in found if not r[0].startswith(("mod:", "aten::")) and r[1] > 0], key=lambda r: -r[1])
    for k, us, c in kern[:40]:
        print(f"  {us:9.1f} {c:4d}  {k[:110]}")
    print("aten ops (CUDA µs per pass):")
    for k, us, c in sorted([r for r in found if r[0].startswith("aten::") and r[1] > 0], key=lambda r: -r[1])[:25]:
        print(f"  {us:9.1f} {c:4d}  {k}")


def cmd_export_full(a):
    import numpy as np
    os.makedirs(a.out, exist_ok=True)
    for fam in ("dynconv", "avit", "sige"):
        cmd = [sys.executable, os.path.join(ROOT, "models", f"{fam}.py"), "--sizes", "full", "--no-dataset", "--out", a.out]
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    np.save(os.path.join(a.out, "sige_mask.npy"), sige_mask())
    print(f"wrote {a.out}/sige_mask.npy")


def cmd_sige_mask(a):
    import numpy as np
    m = sige_mask()
    np.save(a.out, m)
    print(f"wrote {a.out}: {list(m.shape)}, density {m.mean():.3f}")


# ---------------------------------------------------------------------------------------------
# A/B of builds on `dynaspa profile`


def parse_profile(out):
    r = {"nodes": {}}
    m = re.search(r"latency median ([0-9.]+) ms", out)
    r["frame_ms"] = float(m.group(1)) if m else float("nan")
    m = re.search(r"overhead \(bitmask \+ tiles \+ select\): ([0-9.]+)% of sparse-op time", out)
    if m:
        r["overhead_pct"] = float(m.group(1))
    in_nodes = False
    for line in out.splitlines():
        if line.startswith("total "):
            # total  density  (share% µs) x 5 phases  op µs  overhead%  kernels
            vals = [float(v) for v in re.findall(r"[0-9.]+%?", line) if not v.endswith("%")]
            if len(vals) >= 7:
                r["phases_us"], r["sparse_op_us"] = vals[1:6], vals[6]
        if line.startswith("per node"):
            in_nodes = True
            continue
        parts = line.split()
        if in_nodes and len(parts) >= 4 and parts[-1].endswith("%") and parts[0] != "node":
            try:
                r["nodes"][parts[0]] = float(parts[-2])
            except ValueError:
                pass
    return r


def cmd_ab(a):
    variants = []
    for spec in a.run:
        name, rest = spec.split("=", 1)
        exe, _, envs = rest.partition(":")
        env = dict(os.environ)
        for kv in filter(None, envs.split(",")):
            k, v = kv.split("=", 1)
            env[k] = v
        variants.append((name, exe, env))
    res = {n: [] for n, _, _ in variants}
    for r in range(a.rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for name, exe, env in order:
            cmd = [exe, "profile", a.model, "--frames", a.frames, "--max-frames", str(a.max_frames),
                   "--threads", str(a.threads), "--nodes", "200"]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"{name}: {' '.join(cmd)} failed:\n{out.stderr}")
            res[name].append(parse_profile(out.stdout))
        print(f"round {r}: " + ", ".join(f"{n} {res[n][-1]['frame_ms']:.3f} ms" for n, _, _ in variants), flush=True)
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    print(f"\nmodel {a.model}, frames {a.frames} (max {a.max_frames}), {a.threads} threads, {a.rounds} rounds; medians over rounds")
    print(f"{'variant':<12} {'frame ms':>9} {'overhead %':>10} {'bitmask':>8} {'tiles':>6} {'select':>7} {'zero':>6} {'compute':>8} {'sparse op µs':>12}")
    for n, _, _ in variants:
        rs = res[n]
        ph = [med([x["phases_us"][i] for x in rs if "phases_us" in x]) for i in range(5)]
        print(f"{n:<12} {med([x['frame_ms'] for x in rs]):>9.3f} {med([x.get('overhead_pct', float('nan')) for x in rs]):>10.2f} "
              f"{ph[0]:>8.1f} {ph[1]:>6.1f} {ph[2]:>7.1f} {ph[3]:>6.1f} {ph[4]:>8.1f} {med([x.get('sparse_op_us', float('nan')) for x in rs]):>12.1f}")
    if a.nodes:
        names = list(res[variants[0][0]][0]["nodes"])
        print(f"\n{'node':<42}" + "".join(f"{n:>12}" for n, _, _ in variants))
        for node in names:
            print(f"{node:<42}" + "".join(f"{med([x['nodes'].get(node, float('nan')) for x in res[n]]):>12.1f}" for n, _, _ in variants))


# ---------------------------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    c = sub.add_parser("cpu", help="dynaspa's CPU backend against ONNX Runtime, interleaved")
    c.add_argument("--model", default="resnet18", help="a models/zoo.py model, built into target/bench/")
    c.add_argument("--onnx", help="an existing model file instead of --model")
    c.add_argument("--input-npy", help="the input to feed (default: standard normal noise)")
    c.add_argument("--threads", type=int, default=2)
    c.add_argument("--rounds", type=int, default=7)
    c.add_argument("--runs", type=int, default=20)
    c.add_argument("--dynaspa", default=DYNASPA)

    o = sub.add_parser("ort", help="ONNX Runtime alone")
    o.add_argument("model")
    o.add_argument("--threads", type=int, default=2)
    o.add_argument("--warmup", type=int, default=5)
    o.add_argument("--runs", type=int, default=30)
    o.add_argument("--batch", type=int, default=1)

    t = sub.add_parser("torch", help="the full-size models in PyTorch, eager and as a CUDA graph")
    t.add_argument("--only", default="dynconv,avit,sige")
    t.add_argument("--runs", type=int, default=50)
    t.add_argument("--warmup", type=int, default=20)
    t.add_argument("--cuda-graph", action="store_true", help="also replay each forward as one CUDA graph")
    t.add_argument("--json")

    tp = sub.add_parser("torch-profile", help="where PyTorch spends the full-size SIGE's GPU time")
    tp.add_argument("--runs", type=int, default=20)
    tp.add_argument("--density", type=float, default=0.3)

    ex = sub.add_parser("export-full", help="the full-size ONNX models and SIGE's edit mask")
    ex.add_argument("--out", default=os.path.join(ROOT, "target", "bench", "full"))

    sm = sub.add_parser("sige-mask", help="the full-size SIGE edit mask")
    sm.add_argument("out")

    ab = sub.add_parser("ab", help="`dynaspa profile` of several builds, rounds alternating")
    ab.add_argument("--run", action="append", required=True, help="NAME=BINARY[:ENV=VAL,...]")
    ab.add_argument("--model", default="models/dynconv_small_d30.onnx")
    ab.add_argument("--frames", default="models/frames/vtest")
    ab.add_argument("--max-frames", type=int, default=60)
    ab.add_argument("--threads", type=int, default=2)
    ab.add_argument("--rounds", type=int, default=9)
    ab.add_argument("--nodes", action="store_true", help="also print per-node medians")

    a = p.parse_args()
    if a.cmd in ("cpu", "ort") and (a.runs < 1 or a.threads < 1):
        p.error("--runs and --threads must be >= 1")
    {"cpu": cmd_cpu, "ort": cmd_ort, "torch": cmd_torch, "torch-profile": cmd_torch_profile,
     "export-full": cmd_export_full, "sige-mask": cmd_sige_mask, "ab": cmd_ab}[a.cmd](a)


if __name__ == "__main__":
    main()
