#!/usr/bin/env python3
"""ONNX Runtime goldens for the reduced DynConv, A-ViT and SIGE models (models/*.py).

    python3 tests/goldens/make_family_goldens.py [--models dynconv_small_d30 avit_small_d30 sige_small]

For each model, tests/goldens/<model>/ gets, per case i:
  <input>_<i>.npy    every graph input (float32, preprocessed; feed as is)
  <output>_<i>.npy   every graph output from ONNX Runtime (CPU, graph optimisations disabled):
                     the model's result and its masks (float32 0/1)
and meta.json (format in tests/goldens/README.md): inputs, outputs, which outputs are masks, the
tolerance, versions and per case the source image(s), the mask densities and the mask margin.

Masks from thresholds can flip where a logit is within rounding of its threshold. Frames are
therefore taken from a candidate list only if every thresholded value (each Greater / Less input
against its constant threshold: DynConv's mask-unit logits, A-ViT's cumulative halting scores) is
at least MIN_MARGIN away from the threshold; the smallest distance is recorded as "mask_margin".

SIGE (inputs `input` = the edited image and `mask` = the thresholded input difference; the
4 committed edit pairs of models/frames/edits/) additionally gets, per case:
  original_<i>.npy       the original image, preprocessed like `input`
  output_cached_<i>.npy  the generator under SIGE's Cached fill: every masked conv output is
                         taken from the run on the original (mask all ones) where mask_r is 0 and
                         computed on the edited image where it is 1; computed with ONNX Runtime on
                         a rewritten graph (each Mul(conv, m) -> conv*m + cache*(1-m))
The run checks that the optimised ONNX Runtime graph agrees (relative L2 <= 1e-5, same masks).
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import PIL
from onnx import helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "models"))
import common  # noqa: E402
import sige  # noqa: E402

TOL_OPT = 1e-5
TOL_RUNTIME = 1e-4
MIN_MARGIN = 1e-4
CANDIDATES = ["models/frames/vtest/vtest_000.jpg", "models/frames/vtest/vtest_300.jpg",
              "models/frames/photos_cv/leuvenA.jpg", "models/frames/photos/chelsea.png",
              "models/frames/vtest/vtest_150.jpg", "models/frames/vtest/vtest_450.jpg",
              "models/frames/photos_cv/fruits.jpg", "models/frames/photos/astronaut.png"]


def thresholds(model):
    """(input tensor name, threshold, op) for every Greater/Less against a constant."""
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    out = []
    for n in model.graph.node:
        if n.op_type in ("Greater", "Less") and n.input[1] in consts:
            out.append((n.input[0], float(np.asarray(consts[n.input[1]]).reshape(-1)[0]), n.name))
    return out


def outputs_of(model):
    return [o.name for o in model.graph.output]


def inputs_of(model):
    inits = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def check_opt(path, feeds, ref, names, masks):
    opt = common.ort_session(path, optimize=True).run(names, feeds)
    for n, a, b in zip(names, ref, opt):
        if n in masks:
            if not np.array_equal(a, b):
                raise RuntimeError(f"{path}: mask {n} differs with ORT optimisations enabled")
        else:
            rel = common.rel_l2(b, a)
            if rel > TOL_OPT or not np.all(np.isfinite(a)):
                raise RuntimeError(f"{path}: {n} optimised vs unoptimised rel L2 {rel:.1e}")


def versions():
    return {"onnxruntime": ort.__version__, "onnx": onnx.__version__, "pillow": PIL.__version__,
            "numpy": np.__version__}


def save_meta(out_dir, meta):
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def classifier_goldens(name, out_root, n_cases=4):
    path = os.path.join(ROOT, "models", f"{name}.onnx")
    model = onnx.load(path)
    props = {p.key: p.value for p in model.metadata_props}
    mean = [float(v) for v in props["dynaspa.mean"].split(",")]
    std = [float(v) for v in props["dynaspa.std"].split(",")]
    mask_names = props["dynaspa.masks"].split(",")
    dims = model.graph.input[0].type.tensor_type.shape.dim
    h, w = dims[2].dim_value, dims[3].dim_value
    names = outputs_of(model)
    thr = thresholds(model)
    sess = common.ort_session(model, extra_outputs=[t[0] for t in thr])
    out_dir = os.path.join(out_root, name)
    os.makedirs(out_dir, exist_ok=True)
    meta = {"model": f"models/{name}.onnx", "inputs": ["input"], "outputs": names,
            "masks": mask_names, "input": "input", "output": "logits",
            "tolerance_rel_l2": TOL_RUNTIME, "input_shape": [1, 3, h, w], "mean": mean, "std": std,
            "preprocess": f"<image> -> PIL bilinear resize to {w}x{h} -> /255 -> (x-mean)/std -> NCHW float32",
            "reference": "onnxruntime CPUExecutionProvider, GraphOptimizationLevel.ORT_DISABLE_ALL",
            "mask_selection": f"frames from a fixed candidate list whose thresholded values are all at least "
                              f"{MIN_MARGIN} from their threshold",
            **versions(), "cases": []}
    i = 0
    for img in CANDIDATES:
        x = common.to_input([common.load_rgb(os.path.join(ROOT, img), w, h)], mean, std)
        res = sess.run(names + [t[0] for t in thr], {"input": x})
        outs, vals = res[:len(names)], res[len(names):]
        margin = min(float(np.abs(v - t[1]).min()) for v, t in zip(vals, thr))
        if margin < MIN_MARGIN:
            print(f"{name}: skip {img} (mask margin {margin:.1e})")
            continue
        check_opt(path, {"input": x}, outs, names, mask_names)
        np.save(os.path.join(out_dir, f"input_{i}.npy"), x)
        for n, o in zip(names, outs):
            np.save(os.path.join(out_dir, f"{n}_{i}.npy"), o.astype(np.float32))
        dens = {n: float(o.mean()) for n, o in zip(names, outs) if n in mask_names}
        meta["cases"].append({"index": i, "image": img, "mask_margin": margin,
                              "mask_density": dens, "top5": np.argsort(-outs[0][0])[:5].tolist()})
        print(f"{name} {i} {img}: margin {margin:.2e}, densities "
              f"{' '.join(f'{d:.2f}' for d in dens.values())}, logits std {outs[0].std():.2f}")
        i += 1
        if i == n_cases:
            break
    if i < n_cases:
        raise RuntimeError(f"{name}: only {i} candidate frames have a mask margin >= {MIN_MARGIN}")
    save_meta(out_dir, meta)


def cached_graph(model):
    """Rewrite every Mul(conv_out, mask) into conv_out*mask + cache*(1-mask), caches as inputs."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    producers = {o: n for n in m.graph.node for o in n.output}
    mask_tensors = {n.output[0] for n in m.graph.node if n.op_type == "MaxPool"}
    new_nodes, caches = [], []
    for n in m.graph.node:
        src = producers.get(n.input[0]) if n.op_type == "Mul" else None
        if src is not None and src.op_type in ("Conv", "ConvTranspose") and n.input[1] in mask_tensors:
            c = f"cache:{src.name}"
            caches.append((c, n.input[0]))
            inv, keep, mixed = f"{n.name}/inv", f"{n.name}/keep", f"{n.name}/new"
            one = f"{n.name}/one"
            new_nodes += [
                helper.make_node("Constant", [], [one], value=numpy_helper.from_array(np.array(1.0, np.float32))),
                helper.make_node("Sub", [one, n.input[1]], [inv]),
                helper.make_node("Mul", [c, inv], [keep]),
                helper.make_node("Mul", [n.input[0], n.input[1]], [mixed]),
                helper.make_node("Add", [mixed, keep], [n.output[0]], name=n.name),
            ]
        else:
            new_nodes.append(n)
    del m.graph.node[:]
    m.graph.node.extend(new_nodes)
    for c, _ in caches:
        m.graph.input.append(helper.make_tensor_value_info(c, onnx.TensorProto.FLOAT, None))
    return m, caches


def sige_goldens(name, out_root):
    path = os.path.join(ROOT, "models", f"{name}.onnx")
    model = onnx.load(path)
    props = {p.key: p.value for p in model.metadata_props}
    mean = [float(v) for v in props["dynaspa.mean"].split(",")]
    std = [float(v) for v in props["dynaspa.std"].split(",")]
    mask_names = props["dynaspa.masks"].split(",")
    dims = model.graph.input[0].type.tensor_type.shape.dim
    h, w = dims[2].dim_value, dims[3].dim_value
    names = outputs_of(model)
    sess = common.ort_session(path)
    cmodel, caches = cached_graph(model)
    cache_sess = common.ort_session(cmodel)
    cache_src = common.ort_session(model, extra_outputs=[s for _, s in caches])
    pairs = json.load(open(os.path.join(ROOT, "models", "frames", "edits", "edits.json")))
    out_dir = os.path.join(out_root, name)
    os.makedirs(out_dir, exist_ok=True)
    meta = {"model": f"models/{name}.onnx", "inputs": inputs_of(model), "outputs": names,
            "masks": mask_names, "tolerance_rel_l2": TOL_RUNTIME, "input_shape": [1, 3, h, w],
            "mean": mean, "std": std,
            "preprocess": f"<image> -> PIL bilinear resize to {w}x{h} -> /255 -> (x-mean)/std -> NCHW float32; "
                          f"mask = (max over channels |edited - original| > {sige.DIFF_THRESHOLD} on the "
                          "resized [0,1] images) as float32 [1,1,H,W]",
            "reference": "onnxruntime CPUExecutionProvider, GraphOptimizationLevel.ORT_DISABLE_ALL",
            "extra": {"original": "the original image, preprocessed (input of the reference run)",
                      "output_cached": "Cached fill: inactive conv outputs from the original's dense run"},
            **versions(), "cases": []}
    ones = np.ones((1, 1, h, w), np.float32)
    for i, p in enumerate(pairs):
        o = common.load_rgb(os.path.join(ROOT, p["original"]), w, h)
        e = common.load_rgb(os.path.join(ROOT, p["edited"]), w, h)
        mk = sige.diff_mask(o, e)[None, None].astype(np.float32)
        xo, xe = common.to_input([o], mean, std), common.to_input([e], mean, std)
        feeds = {"input": xe, "mask": mk}
        outs = sess.run(names, feeds)
        check_opt(path, feeds, outs, names, mask_names)
        dense = sess.run(["output"], {"input": xe, "mask": ones})[0]
        dense_orig = sess.run(["output"], {"input": xo, "mask": ones})[0]
        orig = cache_src.run([s for _, s in caches], {"input": xo, "mask": ones})
        cfeeds = dict(feeds, **{c: v for (c, _), v in zip(caches, orig)})
        cached = cache_sess.run(["output"], cfeeds)[0]
        for n, a in [("input", xe), ("mask", mk), ("original", xo), ("output_cached", cached)] + \
                list(zip(names, outs)):
            np.save(os.path.join(out_dir, f"{n}_{i}.npy"), a.astype(np.float32))
        dens = {n: float(v.mean()) for n, v in zip(names, outs) if n in mask_names}
        inside = mk[0, 0] > 0
        meta["cases"].append({"index": i, "original": p["original"], "edited": p["edited"],
                              "edit": p["edit"], "mask_density": dict(mask=float(mk.mean()), **dens),
                              "cached_vs_dense_rel_l2": common.rel_l2(cached, dense),
                              "edited_vs_original_dense_rel_l2": common.rel_l2(dense, dense_orig)})
        print(f"{name} {i} {p['name']}: mask {mk.mean():.3f}, "
              f"{' '.join(f'{k} {v:.2f}' for k, v in dens.items())}; cached vs dense rel L2 "
              f"{common.rel_l2(cached, dense):.2e} (edited pixels {inside.mean():.3f})")
    save_meta(out_dir, meta)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["dynconv_small_d30", "avit_small_d30", "sige_small"])
    args = ap.parse_args()
    out_root = os.path.join(ROOT, "tests", "goldens")
    for m in args.models:
        if m.startswith("sige"):
            sige_goldens(m, out_root)
        else:
            classifier_goldens(m, out_root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
