#!/usr/bin/env python3
"""Where two dynaspa runs of a model part ways: every float intermediate of MODEL becomes a graph
output, `dynaspa run` computes it once per configuration on the same random inputs, and each
configuration is compared with the first, op by op in graph order.

    python3 benches/layer_diff.py MODEL [--dynaspa BIN] --run "--backend cpu" \\
        --run "--backend cuda --precision f16" \\
        --run "DYNASPA_CUDNN_LIB=/nonexistent --backend cuda --precision f16"

A --run is `dynaspa run` options, after any NAME=VALUE environment settings. Prints per
configuration its first rows, every row whose relative L2 against the reference passes --bad or
that holds NaN (up to --rows of them), and the model's outputs. Inputs: standard normal draws,
binary (density 0.3) for inputs named *mask*. Needs onnx, numpy and pillow (models/common.py).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models"))
import onnx
from common import rel_l2  # noqa: E402  (models/common.py)
from onnx import TensorProto

DYNASPA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "target", "release", "dynaspa")


def exposed(src, dst):
    """MODEL with every float node output a graph output; the names in graph order."""
    m = onnx.shape_inference.infer_shapes(onnx.load(src))
    typed = {v.name: v for v in m.graph.value_info}
    outputs = {o.name for o in m.graph.output}
    names = []
    for n in m.graph.node:
        for o in n.output:
            v = typed.get(o)
            if o in outputs:
                names.append(o)
            elif v is not None and v.type.tensor_type.elem_type == TensorProto.FLOAT:
                m.graph.output.append(v)
                names.append(o)
    onnx.save(m, dst)
    return m, names


def file_name(value):
    """The .npy file `dynaspa run --output-dir` writes a value to."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", value) + ".npy"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--dynaspa", default=DYNASPA)
    ap.add_argument("--run", action="append", required=True, help="dynaspa run options; the first is the reference")
    ap.add_argument("--bad", type=float, default=2e-2, help="relative L2 that counts as wrong")
    ap.add_argument("--rows", type=int, default=8, help="wrong rows shown per configuration")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if len(a.run) < 2:
        sys.exit("layer_diff: give at least two --run configurations (the first is the reference)")

    work = tempfile.mkdtemp(prefix="layer_diff_")
    model, names = exposed(a.model, os.path.join(work, "exposed.onnx"))
    producer = {o: n for n in model.graph.node for o in n.output}
    rng = np.random.default_rng(a.seed)
    init = {t.name for t in model.graph.initializer}
    feeds = []
    for i in model.graph.input:
        if i.name in init:
            continue
        shape = [d.dim_value or 1 for d in i.type.tensor_type.shape.dim]
        x = (rng.random(shape) < 0.3) if "mask" in i.name.lower() else rng.standard_normal(shape)
        path = os.path.join(work, file_name(i.name))
        np.save(path, x.astype(np.float32))
        feeds += ["-i", f"{i.name}={path}"]

    dirs = []
    for k, run in enumerate(a.run):
        words = run.split()
        env = dict(w.split("=", 1) for w in words if re.match(r"^[A-Z_][A-Z0-9_]*=", w))
        opts = [w for w in words if not re.match(r"^[A-Z_][A-Z0-9_]*=", w)]
        out = os.path.join(work, f"run{k}")
        r = subprocess.run([a.dynaspa, "run", os.path.join(work, "exposed.onnx"), *feeds, *opts, "--output-dir", out],
                           capture_output=True, text=True, env={**os.environ, **env})
        tail = (r.stderr if r.returncode else r.stdout).strip().splitlines()[-1:]
        print(f"[{k}] {run}: exit {r.returncode} {tail[0] if tail else ''}")
        dirs.append(out if r.returncode == 0 else None)
    if dirs[0] is None:
        sys.exit("layer_diff: the reference run failed")

    outputs = {o.name for o in onnx.load(a.model).graph.output}
    for k in range(1, len(dirs)):
        if dirs[k] is None:
            continue
        print(f"== [{k}] {a.run[k]} against [0] {a.run[0]}")
        shown = wrong = 0
        for name in names:
            p, q = os.path.join(dirs[k], file_name(name)), os.path.join(dirs[0], file_name(name))
            if not (os.path.exists(p) and os.path.exists(q)):
                continue
            got, want = np.load(p), np.load(q)
            err = rel_l2(got, want) if got.shape == want.shape else float("inf")
            nan = int(np.isnan(got).sum())
            bad = nan > 0 or not err <= a.bad
            if shown < 4 or name in outputs or (bad and wrong < a.rows):
                op = producer[name].op_type if name in producer else "input"
                print(f"  {op:20s} {name[:56]:56s} {str(got.shape):18s} rel L2 {err:.2e}  NaN {nan}")
                shown += 1
                wrong += bad
    print(f"(intermediates kept in {work})")


if __name__ == "__main__":
    main()
