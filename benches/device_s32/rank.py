#!/usr/bin/env python3
"""The N fastest members alone per (op, batch, density) of a gpu_sparse_bench --json, with the
work-groups their GEMM launches for the columns it had (tiles of TN columns per image, TM
channels, the splits that get a stage), so a sweep's winners can be read against 132 SMs.

    python3 benches/device_s32/rank.py OURS.jsonl [N]
"""
import json
import re
import sys


def ceil_div(a, b):
    return -(-a // b)


def groups(member, cols, cout=256, k=256, batch=1):
    m = re.search(r"m(\d+)n(\d+)k(\d+)_w\d+x\d+_s(\d+)$", member)
    if not m:
        return ""
    tm, tn, tk, ks = map(int, m.groups())
    # Each split takes whole stages of TK; only the splits that get one run.
    chunk = ceil_div(ceil_div(k, ks), tk) * tk
    working = ceil_div(k, chunk)
    return f"{ceil_div(cols, tn) * batch * ceil_div(cout, tm) * working} groups ({working} splits)"


def main(path, n=12):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    by = {}
    for o in rows:
        by.setdefault((o["op"], o["batch"], o["density_target"]), []).append(o)
    for (op, b, d), g in sorted(by.items()):
        cols = round(1600 * g[0]["density"])  # per image of 40 x 40, on average
        print(f"{op} b{b} d{d} (~{cols} columns per image): {len(g)} members; lagged {g[0].get('steady_lagged_us')} ({g[0].get('steady_member')})")
        for o in sorted((o for o in g if o["member"] != "dense"), key=lambda o: o["us"])[:n]:
            print(f"  {o['us']:7.1f}  {o['member']:<34} {groups(o['member'], cols, batch=b)}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 12)
