"""SIGE's edit mask for the full-size model (1x1x168x224, density 0.3): random discs, seed 7,
the mask of session 6's device scripts.

    python3 benches/device_s22/sige_mask.py OUT.npy
"""
import sys

import numpy as np

rng = np.random.default_rng(7)
m = np.zeros((1, 1, 168, 224), np.float32)
y, x = np.ogrid[:168, :224]
while m.mean() < 0.3:
    cy, cx, r = rng.integers(0, 168), rng.integers(0, 224), rng.integers(8, 30)
    m[0, 0][(y - cy) ** 2 + (x - cx) ** 2 < r * r] = 1
np.save(sys.argv[1], m)
