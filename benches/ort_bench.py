#!/usr/bin/env python3
"""ONNX Runtime CPU latency baseline.

    python3 benches/ort_bench.py MODEL.onnx --threads 2 --warmup 5 --runs 30 [--batch 1]

Runs the model with onnxruntime's CPUExecutionProvider, default graph optimisations
(ORT_ENABLE_ALL), intra_op_num_threads=--threads, inter_op_num_threads=1, sequential execution,
on one fixed random-normal input (seed 0; symbolic dimensions: the first one is --batch, any other
is 1). Each timed run is one session.run() call measured with time.perf_counter(). Prints
median/min/p90 latency in ms, then one JSON line with the numbers as the last line of output.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort

DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
          "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(uint8)": np.uint8,
          "tensor(int8)": np.int8, "tensor(bool)": np.bool_}


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def make_inputs(sess, batch, rng):
    feeds = {}
    for i in sess.get_inputs():
        shape = []
        for k, d in enumerate(i.shape):
            if isinstance(d, int) and d > 0:
                shape.append(d)
            else:  # symbolic or unknown
                shape.append(batch if k == 0 else 1)
        dt = DTYPES.get(i.type)
        if dt is None:
            raise SystemExit(f"input {i.name}: unsupported type {i.type}")
        if np.issubdtype(dt, np.floating):
            feeds[i.name] = rng.standard_normal(shape).astype(dt)
        elif dt is np.bool_:
            feeds[i.name] = rng.random(shape) < 0.5
        else:
            feeds[i.name] = rng.integers(0, 2, shape).astype(dt)
    return feeds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2, help="intra_op_num_threads")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--batch", type=int, default=1, help="value for a symbolic first dimension")
    args = ap.parse_args()
    if args.runs < 1 or args.warmup < 0 or args.threads < 1 or args.batch < 1:
        ap.error("--runs, --threads, --batch must be >= 1 and --warmup >= 0")

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    t0 = time.perf_counter()
    sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    load_ms = (time.perf_counter() - t0) * 1e3

    feeds = make_inputs(sess, args.batch, np.random.default_rng(0))
    outs = [o.name for o in sess.get_outputs()]
    for _ in range(args.warmup):
        sess.run(outs, feeds)
    times = []
    for _ in range(args.runs):
        t = time.perf_counter()
        sess.run(outs, feeds)
        times.append((time.perf_counter() - t) * 1e3)

    med = statistics.median(times)
    mn = min(times)
    p90 = float(np.percentile(times, 90))
    shapes = {k: list(v.shape) for k, v in feeds.items()}
    print(f"model      {args.model}")
    print(f"inputs     {shapes}")
    print(f"ort        {ort.__version__} CPUExecutionProvider, ORT_ENABLE_ALL, "
          f"intra_op {args.threads}, inter_op 1 on {cpu_name()} ({os.cpu_count()} logical CPUs)")
    print(f"runs       {args.runs} after {args.warmup} warm-up (session load {load_ms:.1f} ms)")
    print(f"median     {med:.3f} ms")
    print(f"min        {mn:.3f} ms")
    print(f"p90        {p90:.3f} ms")
    print(json.dumps({
        "model": os.path.basename(args.model), "engine": "onnxruntime", "ort_version": ort.__version__,
        "provider": "CPUExecutionProvider", "threads": args.threads, "batch": args.batch,
        "warmup": args.warmup, "runs": args.runs, "median_ms": round(med, 4),
        "min_ms": round(mn, 4), "p90_ms": round(p90, 4), "cpu": cpu_name(),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
