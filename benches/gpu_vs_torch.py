#!/usr/bin/env python3
"""Joins gpu_sparse_bench --json (ours) with gpu_baselines.py --masks --json (PyTorch) from the
same run: per op, batch and density, our dense member, our fastest member alone and with
lagged dispatch (what a frame pays), PyTorch's cuDNN conv with its bias and ReLU (what a framework runs; `conv`: the conv alone)
and its best gather-conv-scatter,
the speedup over cuDNN and issue 5's target for it; where the bench timed whole frames (session
22), the op's whole frame launch by launch (`frame`: zero fill, mask launch, member) and from one
recorded CUDA graph (`graph`), and the speedup of the graph's frame over cuDNN.

    python3 benches/gpu_vs_torch.py OURS.jsonl TORCH.jsonl
"""
import json
import sys

TORCH_OP = {"conv3x3": "conv3x3_s1_40x40_256", "conv1x1": "conv1x1_40x40_256",
            "conv3x3s2": "conv3x3_s2_80x80_128_256", "dw3x3": "dw3x3_40x40_256"}


def target(op, d):
    if d >= 1.0:
        return 1 / 1.1  # within 10% of cuDNN
    if op == "conv3x3":
        return {0.1: 5.0, 0.3: 2.5, 0.5: 1.5}.get(round(d, 1))
    return 0.5 / d


def main(ours_path, torch_path):
    ours = [json.loads(l) for l in open(ours_path) if l.strip()]
    torch = [json.loads(l) for l in open(torch_path) if l.strip()]
    keys = sorted({(o["op"], o["batch"], o["density_target"]) for o in ours})
    print(f"{'op':<10} {'b':>2} {'dens':>5} | {'ours dense':>10} {'best':>8} {'member':>9} {'+lagged':>8} | "
          f"{'cuDNN':>8} {'conv':>7} {'gcs':>8} | {'vs cuDNN':>8} {'target':>6}  {'ok':>3} | {'frame':>7} {'graph':>7} {'graph vs':>8}")
    for op, b, d in keys:
        rows = [o for o in ours if (o["op"], o["batch"], o["density_target"]) == (op, b, d)]
        dense = next((o["us"] for o in rows if o["member"] == "dense"), float("nan"))
        best = min(rows, key=lambda o: o["us"])
        lag = best.get("steady_lagged_us", float("nan"))
        tname = TORCH_OP.get(op, op)
        cud = [t["us"] for t in torch if t.get("op", "").startswith(tname.split("_")[0]) and t.get("op") == tname
               and t["batch"] == b and t["impl"] == "cudnn"]
        gcs = [t["us"] for t in torch if t.get("op") == tname and t["batch"] == b and t["impl"].startswith("gcs")
               and abs(t.get("density_target", 1.0) - d) < 1e-6]
        cu = cud[0] if cud else float("nan")
        only = [t["us"] for t in torch if t.get("op") == tname and t["batch"] == b and t["impl"] == "cudnn-conv-only"]
        co = only[0] if only else float("nan")
        tg = target(op, d)
        sp = cu / lag if lag == lag else float("nan")
        ok = "yes" if tg and sp >= tg else "no"
        fr, fg = best.get("frame_us", float("nan")), best.get("frame_graph_us", float("nan"))
        print(f"{op:<10} {b:>2} {d:>5.2f} | {dense:>10.1f} {best['us']:>8.1f} {best['member']:>9} {lag:>8.1f} | "
              f"{cu:>8.1f} {co:>7.1f} {min(gcs) if gcs else float('nan'):>8.1f} | {sp:>7.2f}x {tg or 0:>6.2f}  {ok:>3} | "
              f"{fr:>7.1f} {fg:>7.1f} {cu / fg:>7.2f}x")


if __name__ == "__main__":
    main(*sys.argv[1:3])
