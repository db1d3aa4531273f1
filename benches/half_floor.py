#!/usr/bin/env python3
"""How far a model's outputs move when its tensors are stored in half precision: the floor any
fp16 engine that stores activations and weights as IEEE half (and computes in f32) starts from.

    python3 benches/half_floor.py MODEL [--goldens DIR] [--sets 3] [--seed 0]

ONNX Runtime runs MODEL three ways against its own f32 run on the same inputs:
  weights   every float initializer rounded to half, activations f32
  acts      every float node output rounded to half (a Cast pair after it), weights f32
  both      the two together: what `--precision f16` stores (dynaspa keeps the values that decide
            masks in f32, so its masks flip less often than here)
A model stored in FLOAT16 is widened to f32 first (its weights are then exactly half already).
Inputs: the golden cases of --goldens (tests/goldens/<model>/meta.json), else --sets uniform
draws in [-1, 1). Prints the relative L2 of the first output per input set, and how many mask
positions flipped (outputs named mask*) where any did: a flipped set measures the mask, not the
rounding. Needs onnx, onnxruntime, numpy and pillow (models/common.py).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models"))
import onnx
import onnxruntime as ort
from common import rel_l2  # noqa: E402  (models/common.py)
from onnx import TensorProto, helper, numpy_helper


def to_half_and_back(a):
    return a.astype(np.float16).astype(np.float32)


def widened(model):
    """A FLOAT16-stored model as f32: initializers, typed values, Cast targets and constants."""
    half = TensorProto.FLOAT16
    for t in model.graph.initializer:
        if t.data_type == half:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))
    for v in [*model.graph.input, *model.graph.output, *model.graph.value_info]:
        if v.type.tensor_type.elem_type == half:
            v.type.tensor_type.elem_type = TensorProto.FLOAT
    for n in model.graph.node:
        for a in n.attribute:
            if a.name == "to" and a.i == half:
                a.i = TensorProto.FLOAT
            elif a.type == onnx.AttributeProto.TENSOR and a.t.data_type == half:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float32), a.t.name))
    return model


def rounded(model, weights, acts):
    """The model with its float initializers and/or float node outputs rounded to half."""
    model = onnx.shape_inference.infer_shapes(model)
    if weights:
        for t in model.graph.initializer:
            if t.data_type == TensorProto.FLOAT:
                t.CopyFrom(numpy_helper.from_array(to_half_and_back(numpy_helper.to_array(t)), t.name))
    if not acts:
        return model
    typed = [*model.graph.value_info, *model.graph.output]
    floats = {v.name for v in typed if v.type.tensor_type.elem_type == TensorProto.FLOAT}
    nodes = []
    for n in model.graph.node:
        nodes.append(n)
        for i, out in enumerate(list(n.output)):
            if out not in floats:
                continue
            n.output[i] = f"{out}__f32"
            nodes.append(helper.make_node("Cast", [f"{out}__f32"], [f"{out}__f16"], to=TensorProto.FLOAT16))
            nodes.append(helper.make_node("Cast", [f"{out}__f16"], [out], to=TensorProto.FLOAT))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


def session(model):
    opts = ort.SessionOptions()
    # No fusion: every rounding placed above must happen.
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def input_sets(model, goldens, sets, seed):
    if goldens:
        meta = json.load(open(os.path.join(goldens, "meta.json")))
        names = meta.get("inputs") or [meta["input"]]
        return [{n: np.load(os.path.join(goldens, f"{n}_{i}.npy")) for n in names} for i in range(len(meta["cases"]))]
    rng = np.random.default_rng(seed)
    init = {t.name for t in model.graph.initializer}
    shapes = {v.name: [d.dim_value or 1 for d in v.type.tensor_type.shape.dim] for v in model.graph.input if v.name not in init}
    return [{n: rng.uniform(-1, 1, s).astype(np.float32) for n, s in shapes.items()} for _ in range(sets)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--goldens", help="a tests/goldens/<model> directory: its cases are the inputs")
    ap.add_argument("--sets", type=int, default=3, help="random input sets (without --goldens)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    base = widened(onnx.load(args.model))
    feeds = input_sets(base, args.goldens, args.sets, args.seed)
    ref = session(base)
    names = [o.name for o in ref.get_outputs()]
    masks = [i for i, n in enumerate(names) if n.startswith("mask")]
    want = [ref.run(None, f) for f in feeds]
    print(f"{args.model}: output {names[0]}, {len(feeds)} input sets, relative L2 against f32")
    for label, w, a in [("weights", True, False), ("acts", False, True), ("both", True, True)]:
        s = session(rounded(widened(onnx.load(args.model)), w, a))
        cells = []
        for f, ws in zip(feeds, want):
            got = s.run(None, f)
            flips = sum(int(((got[i] != 0) != (ws[i] != 0)).sum()) for i in masks)
            cells.append(f"{rel_l2(got[0], ws[0]):.2e}" + (f" ({flips} mask flips)" if flips else ""))
        print(f"  {label:8s} " + "  ".join(cells))


if __name__ == "__main__":
    main()
