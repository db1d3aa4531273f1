#!/usr/bin/env python3
"""Print the density tables of models/README.md from the statistics the exporters write next to
each mask dataset (models/masks/<model>_dNN.json).

    python3 models/density_table.py DIR [DIR ...]

Every DIR is searched for <family>_<size>_dNN.json; one markdown table per family and size, one
row per mask, one column group per target density found: mean density over the 200 frames
(+- its standard deviation over frames) and the mean 4-connected component size in cells.
"""
import glob
import json
import os
import re
import sys


def main():
    stats = {}
    for d in sys.argv[1:]:
        for p in glob.glob(os.path.join(d, "*.json")):
            m = re.match(r"(dynconv|avit|sige)_(small|full)_d(\d+)\.json$", os.path.basename(p))
            if m:
                stats.setdefault((m.group(1), m.group(2)), {})[int(m.group(3))] = json.load(open(p))
    for (fam, size) in sorted(stats, key=lambda k: (["dynconv", "avit", "sige"].index(k[0]), k[1] != "small")):
        by_d = stats[(fam, size)]
        ds = sorted(by_d)
        layers = list(by_d[ds[0]]["layers"])
        print(f"**{fam}_{size}** ({by_d[ds[0]]['frames']} frames)\n")
        print("| mask | H x W | " + " | ".join(f"d={d / 100:.1f}: density +- std, component" for d in ds) + " |")
        print("| --- | --- | " + " | ".join("---" for _ in ds) + " |")
        for name in layers:
            s0 = by_d[ds[0]]["layers"][name]
            cells = []
            for d in ds:
                s = by_d[d]["layers"].get(name)
                cells.append("-" if s is None else
                             f"{s['density']:.3f} +- {s['density_std']:.3f}, {s['mean_component_cells']:.1f}")
            print(f"| `{name}` | {s0['shape'][0]} x {s0['shape'][1]} | " + " | ".join(cells) + " |")
        means = []
        for d in ds:
            j = by_d[d]
            means.append(j.get("mean_density", j.get("mean_density_over_ops")))
        print("| **mean, the targeted quantity** | | " + " | ".join(f"{m:.3f}" for m in means) + " |\n")


if __name__ == "__main__":
    sys.exit(main())
