#!/usr/bin/env python3
"""Member-by-member ratios of gpu_sparse_bench --json runs given as (new, old) pairs: per op and batch,
the median and range of new / old over the members both timed, each run's fastest member and
its steady (lagged) time, and the members whose fused finish could apply (TM x TN x KS within
the fused limit) apart from the rest.

    python3 benches/device_s32/fused_pairs.py NEW1.jsonl OLD1.jsonl [NEW2.jsonl OLD2.jsonl ...]
"""
import json
import re
import statistics
import sys

FUSED_MAX = 32768


def load(path):
    out = {}
    for line in open(path):
        if line.strip():
            o = json.loads(line)
            out[(o["op"], o["batch"], o["member"])] = o
    return out


def fusable(member):
    m = re.search(r"m(\d+)n(\d+)k\d+_w\d+x\d+_s(\d+)$", member)
    return bool(m) and int(m.group(3)) > 1 and int(m.group(1)) * int(m.group(2)) * int(m.group(3)) <= FUSED_MAX


def main(paths):
    for new_p, old_p in zip(paths[::2], paths[1::2]):
        new, old = load(new_p), load(old_p)
        print(f"{new_p} / {old_p}")
        for op, b in sorted({k[:2] for k in new}):
            both = [m for (o, bb, m) in new if (o, bb) == (op, b) and m != "dense" and (op, b, m) in old]
            for label, ms in (("fusable", [m for m in both if fusable(m)]), ("other", [m for m in both if not fusable(m)])):
                if not ms:
                    continue
                r = [new[(op, b, m)]["us"] / old[(op, b, m)]["us"] for m in ms]
                print(f"  {op} b{b} {label:<8} {len(ms):>3} members: median {statistics.median(r):.3f} ({min(r):.3f}-{max(r):.3f})")
            for tag, run in (("new", new), ("old", old)):
                best = min((m for (o, bb, m) in run if (o, bb) == (op, b) and m != "dense"), key=lambda m: run[(op, b, m)]["us"])
                o = run[(op, b, best)]
                print(f"  {op} b{b} {tag}: fastest {best} {o['us']:.1f}; steady {o['steady_member']} {o['steady_alone_us']:.1f} alone, {o['steady_lagged_us']:.1f} lagged, launches {o['steady_launches_us']}")


if __name__ == "__main__":
    main(sys.argv[1:])
