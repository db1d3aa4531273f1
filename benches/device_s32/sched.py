#!/usr/bin/env python3
"""Session 32's conv1x1 sweeps (gpu_sparse_bench --schedules), one comma-separated list.
1: tiles of 16 and 32 columns whose splits fill 132 SMs evenly at density 0.1 (about 160
columns per 40 x 40 image), beside the 64 x 64 and 128 x 64 members the knob sample's best
were (call 32.1). 2: around 32.1's winners (128 x 32 at KS 6 for batches 2 and 4, 64 x 32 at
KS 6 for batch 1): tiles of every output channel (256 x 16, 256 x 32), other splits and
work-item shapes. 3: the fastest of 1 and 2 at each batch (calls 32.1-32.3), for A/Bs.

    python3 benches/device_s32/sched.py [1|2|3]
"""
import sys

out = []


def add(tm, tn, tk, wm, wn, kss):
    for ks in kss:
        name = f"m{tm}n{tn}k{tk}_w{wm}x{wn}_s{ks}"
        if name not in out:
            out.append(name)



def sweep1():
    for tk in (16, 8):
        for wm, wn in ((4, 2), (4, 4), (2, 4), (8, 2)):
            add(64, 32, tk, wm, wn, (2, 3, 4, 5, 6, 8))
        for wm, wn in ((8, 4), (4, 4), (8, 2)):
            add(128, 32, tk, wm, wn, (2, 3, 4, 6))
    for wm, wn in ((2, 2), (4, 2), (2, 4)):
        add(32, 32, 16, wm, wn, (1, 2, 3, 4, 6))
    for wm, wn in ((4, 1), (2, 2), (4, 2)):
        add(64, 16, 16, wm, wn, (2, 3, 4, 6))
    for wm, wn in ((4, 2), (8, 2)):
        add(128, 16, 16, wm, wn, (2, 3, 4))
    add(64, 64, 16, 4, 4, (2, 3, 4, 5, 6, 8, 10, 12, 14, 18, 21, 22))
    add(128, 64, 16, 8, 4, (3, 4, 6, 8, 10, 14, 21))


def sweep2():
    for tk in (16, 8):
        for wm, wn in ((4, 4), (8, 2), (8, 4), (4, 2)):
            add(128, 32, tk, wm, wn, (5, 6, 7, 8, 10, 12))
        for wm, wn in ((8, 4), (8, 2), (16, 2)):
            add(256, 32, tk, wm, wn, (3, 4, 5, 6, 8, 10, 12))
    for wm, wn in ((4, 2), (8, 2), (4, 1)):
        add(128, 16, 16, wm, wn, (3, 4, 5, 6, 8))
    for wm, wn in ((8, 2), (16, 1), (8, 1)):
        add(256, 16, 16, wm, wn, (3, 4, 6, 8))
    add(64, 32, 16, 4, 2, (5, 6, 7, 8))
    add(64, 32, 8, 4, 2, (5, 6, 7, 8))
    add(32, 32, 16, 2, 2, (6, 8))
    add(64, 64, 16, 4, 4, (4, 8))


def sweep3():
    for wm, wn in ((4, 4), (8, 2)):
        add(128, 32, 16, wm, wn, (6, 7, 8, 10, 12))
    add(128, 32, 8, 4, 4, (6, 12))
    add(64, 32, 16, 4, 2, (6, 7, 8))
    add(64, 64, 16, 4, 4, (4, 8))
    add(256, 32, 8, 8, 4, (12,))
    add(256, 32, 16, 8, 2, (6, 10))


{"2": sweep2, "3": sweep3}.get((sys.argv[1:] or ["1"])[0], sweep1)()
print(",".join(out))
