#!/usr/bin/env python3
"""Two gpu_sparse_bench --json runs of the same ops side by side (this tree's, then a baseline's,
for each round given): per op and density, our dense member and the fastest member alone in each,
the dense-over-fastest speedup, and the median ratio (this tree / baseline) over the members both
timed.

    python3 benches/device_s24/cl_pairs.py NEW_1.jsonl OLD_1.jsonl [NEW_2.jsonl OLD_2.jsonl ...]
"""
import statistics
import sys

from best import by_op


def load(path):
    return {key: {o["member"]: o["us"] for o in group} for key, group in by_op(path).items()}


def main(paths):
    for r in range(0, len(paths) - 1, 2):
        new, old = load(paths[r]), load(paths[r + 1])
        print(f"round {r // 2 + 1}: {paths[r]} against {paths[r + 1]}")
        for key in sorted(set(new) & set(old)):
            a, b = new[key], old[key]
            both = set(a) & set(b)
            fa = min((v, m) for m, v in a.items() if m != "dense")
            fb = min((v, m) for m, v in b.items() if m != "dense")
            ratio = statistics.median(a[m] / b[m] for m in both) if both else float("nan")
            print(f"  {key[0]:<10} b{key[1]} {key[2]:.2f}: dense {a.get('dense', float('nan')):.1f} / {b.get('dense', float('nan')):.1f}, "
                  f"fastest {fa[0]:.1f} ({fa[1]}) / {fb[0]:.1f} ({fb[1]}), over dense {a['dense'] / fa[0]:.2f}x / {b['dense'] / fb[0]:.2f}x, "
                  f"median member ratio {ratio:.3f} over {len(both)}")


if __name__ == "__main__":
    main(sys.argv[1:])
