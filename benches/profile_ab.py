#!/usr/bin/env python3
"""A/B of `dynaspa profile` between builds (or environment settings), rounds alternating.

    python3 benches/profile_ab.py --run A=/path/to/dynaspa --run B=/other/dynaspa[:ENV=VAL,...] \
        [--model models/dynconv_small_d30.onnx] [--frames models/frames/vtest] [--max-frames 60] \
        [--threads 2] [--rounds 9] [--nodes]

Each round runs every variant once (the order rotates per round, so drift and other load hit
all alike): `dynaspa profile MODEL --frames DIR --max-frames N --threads T --nodes 200`. Per
variant it reports the median over rounds of: the frame latency median, the overhead share and
per-phase µs of the Table 4 total row, the sparse-op time, and (--nodes) every node's median µs.
A variant's `:ENV=VAL,...` suffix sets environment variables for its runs only.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys


def parse(out):
    r = {"nodes": {}}
    m = re.search(r"latency median ([0-9.]+) ms", out)
    r["frame_ms"] = float(m.group(1)) if m else float("nan")
    m = re.search(r"overhead \(bitmask \+ tiles \+ select\): ([0-9.]+)% of sparse-op time at mean density ([0-9.]+)", out)
    if m:
        r["overhead_pct"], r["density"] = float(m.group(1)), float(m.group(2))
    for line in out.splitlines():
        if line.startswith("total "):
            # total  density  share% us (x5)  op_us  overhead%  kernels
            nums = re.findall(r"[0-9.]+%?", line)
            vals = [float(v) for v in nums if not v.endswith("%")]
            # density, then 5 medians, then op µs
            if len(vals) >= 7:
                r["phases_us"] = vals[1:6]
                r["sparse_op_us"] = vals[6]
    in_nodes = False
    for line in out.splitlines():
        if line.startswith("per node"):
            in_nodes = True
            continue
        if in_nodes:
            parts = line.split()
            if len(parts) >= 4 and parts[-1].endswith("%") and parts[0] != "node":
                try:
                    r["nodes"][parts[0]] = float(parts[-2])
                except ValueError:
                    pass
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", action="append", required=True, help="NAME=BINARY[:ENV=VAL,...]")
    ap.add_argument("--model", default="models/dynconv_small_d30.onnx")
    ap.add_argument("--frames", default="models/frames/vtest")
    ap.add_argument("--max-frames", type=int, default=60)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--nodes", action="store_true", help="also print per-node medians")
    a = ap.parse_args()

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
            res[name].append(parse(out.stdout))
        line = ", ".join(f"{n} {res[n][-1]['frame_ms']:.3f} ms" for n, _, _ in variants)
        print(f"round {r}: {line}", flush=True)

    med = lambda xs: statistics.median(xs) if xs else float("nan")
    print(f"\nmodel {a.model}, frames {a.frames} (max {a.max_frames}), {a.threads} threads, {a.rounds} rounds; medians over rounds")
    print(f"{'variant':<12} {'frame ms':>9} {'overhead %':>10} {'bitmask':>8} {'tiles':>6} {'select':>7} {'zero':>6} {'compute':>8} {'sparse op µs':>12}")
    for n, _, _ in variants:
        rs = res[n]
        ph = [med([x["phases_us"][i] for x in rs if "phases_us" in x]) for i in range(5)]
        print(f"{n:<12} {med([x['frame_ms'] for x in rs]):>9.3f} {med([x.get('overhead_pct', float('nan')) for x in rs]):>10.2f} "
              f"{ph[0]:>8.1f} {ph[1]:>6.1f} {ph[2]:>7.1f} {ph[3]:>6.1f} {ph[4]:>8.1f} "
              f"{med([x.get('sparse_op_us', float('nan')) for x in rs]):>12.1f}")
    if a.nodes:
        names = list(res[variants[0][0]][0]["nodes"].keys())
        print(f"\n{'node':<42}" + "".join(f"{n:>12}" for n, _, _ in variants))
        totals = {n: 0.0 for n, _, _ in variants}
        for node in names:
            row = f"{node:<42}"
            for n, _, _ in variants:
                v = med([x["nodes"].get(node, float("nan")) for x in res[n]])
                totals[n] += v
                row += f"{v:>12.1f}"
            print(row)
        print(f"{'sum of node medians':<42}" + "".join(f"{totals[n]:>12.1f}" for n, _, _ in variants))


if __name__ == "__main__":
    main()
