#!/usr/bin/env python3
"""Per op, batch and density of a gpu_sparse_bench --json: our dense member, the fastest member
alone over every member and over those that split the reduction at most 32 ways (the sample
before session 24), the member the bench then timed with lagged dispatch and its time, and
(given PyTorch's gpu_baselines.py --json of the same run) cuDNN's conv + bias + ReLU with the
lagged member's speedup over it; without PyTorch, the speedup over our dense member.

    python3 benches/device_s24/best.py OURS.jsonl [TORCH.jsonl]
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gpu_vs_torch import TORCH_OP  # noqa: E402


def splits(member):
    m = re.search(r"_s(\d+)$", member)
    return int(m.group(1)) if m else 1


def rows(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def by_op(path):
    """A bench's rows grouped by (op, batch, density target), in that order."""
    out = {}
    for o in rows(path):
        out.setdefault((o["op"], o["batch"], o["density_target"]), []).append(o)
    return dict(sorted(out.items()))


def main(ours_path, torch_path=None):
    torch = rows(torch_path) if torch_path else []
    print(f"{'op':<10} {'b':>2} {'dens':>5} | {'dense':>7} {'best':>7} {'KS<=32':>7} | {'lagged':>7} member")
    for (op, b, d), group in by_op(ours_path).items():
        dense = next((o["us"] for o in group if o["member"] == "dense"), float("nan"))
        sparse = [o for o in group if o["member"] != "dense"]
        best = min(sparse, key=lambda o: o["us"])
        low = min((o for o in sparse if splits(o["member"]) <= 32), key=lambda o: o["us"])
        lag, pick = group[0]["steady_lagged_us"], group[0]["steady_member"]
        cud = [t["us"] for t in torch if t.get("op") == TORCH_OP.get(op, op) and t["batch"] == b and t["impl"] == "cudnn"]
        vs = f"{cud[0] / lag:.2f}x of cuDNN {cud[0]:.1f}" if cud else f"{dense / lag:.2f}x of dense"
        print(f"{op:<10} {b:>2} {d:>5.2f} | {dense:>7.1f} {best['us']:>7.1f} {low['us']:>7.1f} | {lag:>7.1f} {pick} ({best['member']} / {low['member']}): {vs}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
