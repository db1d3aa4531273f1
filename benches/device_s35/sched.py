#!/usr/bin/env python3
"""Session 35's conv1x1 sweep at batch 1 and density 0.1 (about 160 columns per 40 x 40 image):
members that do not split (KS 1, one launch and no finish) in tiles small enough that their
work-groups fill 132 SMs, TK 16 to 64 (fewer, deeper stages), beside two splits of the same
tiles and session 32-35's fastest split members, for gpu_sparse_bench --schedules.

    python3 benches/device_s35/sched.py
"""
out = []


def add(tm, tn, tk, wm, wn, kss):
    for ks in kss:
        name = f"m{tm}n{tn}k{tk}_w{wm}x{wn}_s{ks}"
        if name not in out:
            out.append(name)


for tk in (16, 32, 64):
    for wm, wn in ((1, 1), (2, 1), (1, 2), (2, 2)):
        add(16, 16, tk, wm, wn, (1,))
    for wm, wn in ((2, 1), (2, 2), (4, 1)):
        add(32, 16, tk, wm, wn, (1,))
    for wm, wn in ((1, 2), (2, 2)):
        add(16, 32, tk, wm, wn, (1,))
    add(32, 32, tk, 2, 2, (1,))
add(16, 16, 32, 1, 1, (2, 4))
add(32, 16, 32, 2, 1, (2, 4))
add(64, 64, 16, 4, 4, (10, 14))
add(128, 32, 16, 4, 4, (24, 28))
print(",".join(out))
