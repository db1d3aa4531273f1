#!/usr/bin/env python3
"""Splits gpu_sparse_bench --fused-finish both --json output into one file per finish path
(PREFIX.fused.jsonl, PREFIX.split.jsonl) by each row's `fused_finish`, for gpu_vs_torch.py.

    python3 benches/device_s8/split_fused.py BOTH.jsonl PREFIX
"""
import json
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for tag, fused in (("fused", True), ("split", False)):
    with open(f"{sys.argv[2]}.{tag}.jsonl", "w") as f:
        for r in rows:
            if r.get("fused_finish") == fused:
                f.write(json.dumps(r) + "\n")
