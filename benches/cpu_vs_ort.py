#!/usr/bin/env python3
"""dynaspa's dense CPU backend against ONNX Runtime (CPU) on the same ONNX file, same machine,
same run, interleaved.

    cargo build --release
    python3 benches/cpu_vs_ort.py [--model resnet18] [--threads 2] [--rounds 7] [--runs 20]

The model is built by models/zoo.py into target/bench/ if missing. Each round times ONNX Runtime
(`--runs` session.run calls after 3 warm-ups, in-process) and then dynaspa (`dynaspa run
--repeat runs+1`, whose first run is a warm-up it excludes), alternating so machine noise hits
both. Reports the median over rounds of each round's median, their ratio, and a Markdown row
for benches/RESULTS.md.
"""
import argparse
import datetime
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benches"))
from ort_bench import cpu_name  # noqa: E402


def npy_write(path, arr):
    np.save(path, arr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--onnx", help="an existing model file instead of building --model")
    ap.add_argument("--input-npy", help="the input to feed (default: standard normal noise); sparse "
                    "models need a real frame, since their masks follow the content")
    a = ap.parse_args()

    bench_dir = os.path.join(ROOT, "target", "bench")
    os.makedirs(bench_dir, exist_ok=True)
    model = a.onnx or os.path.join(bench_dir, f"{a.model}.onnx")
    if a.onnx:
        a.model = os.path.splitext(os.path.basename(a.onnx))[0]
    elif not os.path.exists(model):
        subprocess.run([sys.executable, os.path.join(ROOT, "models", "zoo.py"), "--out", bench_dir, "--only", a.model], check=True)
    exe = os.path.join(ROOT, "target", "release", "dynaspa")
    if not os.path.exists(exe):
        sys.exit("build first: cargo build --release")

    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in inp.shape]
    x = np.load(a.input_npy) if a.input_npy else np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    xpath = os.path.join(bench_dir, f"{a.model}_input.npy")
    npy_write(xpath, x)

    ours_cmd = [exe, "run", model, "--input", f"{inp.name}={xpath}", "--threads", str(a.threads), "--repeat", str(a.runs + 1)]
    ref = sess.run(None, {inp.name: x})[0]
    out_dir = os.path.join(bench_dir, "out")
    subprocess.run(ours_cmd + ["--output-dir", out_dir], check=True, capture_output=True)
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
        out = subprocess.run(ours_cmd, check=True, capture_output=True, text=True).stdout
        m = re.search(r"run ([0-9.]+) ms \(median", out)
        if not m:
            sys.exit(f"could not parse dynaspa output: {out}")
        ours_med.append(float(m.group(1)))
        print(f"round {r}: onnxruntime {ort_med[-1]:.2f} ms, dynaspa {ours_med[-1]:.2f} ms", flush=True)

    o, d = statistics.median(ort_med), statistics.median(ours_med)
    print(f"model {a.model}, {a.threads} threads, {a.rounds} rounds x {a.runs} runs")
    print(f"onnxruntime {ort.__version__}: median {o:.2f} ms")
    print(f"dynaspa cpu: median {d:.2f} ms (output relative L2 vs ORT {rel:.1e})")
    print(f"ratio dynaspa/onnxruntime: {d / o:.2f}")
    print(f"| {datetime.date.today()} | {a.model} b1 | {cpu_name()}, {a.threads} threads | ORT {ort.__version__} {o:.2f} ms | dynaspa {d:.2f} ms | {d / o:.2f}x |")


if __name__ == "__main__":
    main()
