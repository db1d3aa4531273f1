"""Shared pieces of the authors'-code exporters in this folder (dynconv_authors.py,
avit_authors.py, sige_authors.py): the authors' checkout on sys.path, calibration frames,
BatchNorm calibration, ridge fits of mask units to frame saliency, stock ONNX export (no op
filter: these graphs are what the authors' code exports, supported or not), the ONNX Runtime vs
PyTorch check, op histograms and golden writing (tests/goldens/<model>/, the layout of
tests/goldens/make_family_goldens.py)."""
import collections
import json
import os
import subprocess
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.dirname(HERE)
ROOT = os.path.dirname(MODELS)
sys.path.insert(0, MODELS)
import common  # noqa: E402  (models/common.py: frames, saliency, ORT sessions)

OPSET = 17
GOLDEN_CANDIDATES = ["models/frames/vtest/vtest_000.jpg", "models/frames/vtest/vtest_300.jpg",
                     "models/frames/photos/chelsea.png", "models/frames/vtest/vtest_150.jpg",
                     "models/frames/vtest/vtest_450.jpg", "models/frames/photos_cv/fruits.jpg",
                     "models/frames/photos/astronaut.png", "models/frames/vtest/vtest_597.jpg",
                     "models/frames/vtest/vtest_060.jpg", "models/frames/vtest/vtest_240.jpg",
                     "models/frames/vtest/vtest_390.jpg", "models/frames/vtest/vtest_510.jpg",
                     "models/frames/photos_cv/home.jpg", "models/frames/photos/coffee.png"]
MIN_MARGIN = 1e-4


class StopForward(Exception):
    """Raised by a hook to end a forward pass once the value it wanted is recorded."""


def repo_commit(repo):
    try:
        return subprocess.check_output(["git", "-C", repo, "rev-parse", "HEAD"], text=True).strip()
    except Exception:
        return "unknown (not a git checkout)"


def calibration_set(h, w, n_vtest=48, n_photos=10):
    """48 vtest frames evenly spread over the committed 200 + 10 still photos (as models/dynconv.py)."""
    vt = common.vtest_paths()
    idx = np.linspace(0, len(vt) - 1, n_vtest).round().astype(int)
    paths = [vt[i] for i in idx] + common.photo_paths()[:n_photos]
    return [common.load_rgb(p, w, h) for p in paths], paths


def target_map(sal, h, w):
    """Saliency maps -> standardised targets at a mask's resolution (area average + 0.7-cell blur)."""
    from scipy.ndimage import gaussian_filter
    t = np.stack([gaussian_filter(common.area_resize(s, h, w), 0.7) for s in sal])
    return (t - t.mean()) / (t.std() + 1e-9)


def ridge(X, y, lam):
    """Ridge regression on standardised columns; returns (weights, intercept, prediction, R^2)
    in the original units of X."""
    import torch
    X = X.double()
    y = torch.as_tensor(y, dtype=torch.float64)
    mu, sd = X.mean(0), X.std(0) + 1e-6
    Xs = (X - mu) / sd
    n, p = Xs.shape
    if p > 2 * n:  # the same solution through the n x n system (push-through identity)
        K = Xs @ Xs.T / n + lam * torch.eye(n, dtype=torch.float64)
        beta = Xs.T @ torch.linalg.solve(K, (y - y.mean()) / n)
    else:
        A = Xs.T @ Xs / n + lam * torch.eye(p, dtype=torch.float64)
        beta = torch.linalg.solve(A, Xs.T @ (y - y.mean()) / n)
    pred = Xs @ beta + y.mean()
    r2 = 1 - float(((pred - y) ** 2).mean() / ((y - y.mean()) ** 2).mean())
    return beta / sd, float(y.mean() - (mu / sd) @ beta), pred, r2


def bn_stat_hooks(model):
    """Forward pre-hooks that set each BatchNorm2d's running statistics from its input batch just
    before it runs (eval mode, so downstream BNs see the calibrated network upstream)."""
    import torch.nn as nn

    def pre(mod, inp):
        a = inp[0].detach().double()
        mod.running_mean.copy_(a.mean((0, 2, 3)).float())
        mod.running_var.copy_(a.var((0, 2, 3), unbiased=False).float() + 1e-3)
    return [m.register_forward_pre_hook(pre) for m in model.modules()
            if isinstance(m, nn.modules.batchnorm._BatchNorm)]


def capture_input(model, module, run, x):
    """Run `run(x)` (the whole calibration batch) with BN calibration hooks until `module` is
    reached; returns the module's first input. BNs after it keep their previous statistics."""
    import torch
    rec = []

    def grab(mod, inp):
        rec.append(inp[0].detach().clone())
        raise StopForward
    hooks = bn_stat_hooks(model) + [module.register_forward_pre_hook(grab)]
    try:
        with torch.no_grad():
            run(x)
    except StopForward:
        pass
    finally:
        for h in hooks:
            h.remove()
    return rec[0]


def full_bn_pass(model, run, x):
    import torch
    hooks = bn_stat_hooks(model)
    with torch.no_grad():
        out = run(x)
    for h in hooks:
        h.remove()
    return out


def export(module, args, path, input_names, output_names, props, doc, preserve_modes=False):
    """torch.onnx.export with the TorchScript exporter at opset 17, fixed shapes, metadata. No
    op filter: the graph is what the authors' code exports. preserve_modes: export the modules'
    train/eval flags as set (TrainingMode.PRESERVE) instead of switching everything to eval."""
    import onnx
    import torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mode = torch.onnx.TrainingMode.PRESERVE if preserve_modes else torch.onnx.TrainingMode.EVAL
        torch.onnx.export(module, args, path, opset_version=OPSET, dynamo=False, training=mode,
                          input_names=list(input_names), output_names=list(output_names),
                          do_constant_folding=True)
    m = onnx.load(path)
    m.doc_string = doc
    m.producer_name = "dynaspa-models"
    del m.metadata_props[:]
    onnx.helper.set_model_props(m, {k: str(v) for k, v in props.items()})
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)
    return m


def op_histogram(m):
    c = collections.Counter(n.op_type for n in m.graph.node)
    return dict(sorted(c.items()))


def mask_values(m, ops=("GreaterOrEqual", "Greater", "Less")):
    """The binary mask tensors of a graph: for every comparison against a constant, its Cast to
    float if one follows, else the comparison's output. Returns [(threshold input, threshold,
    comparison node, mask tensor, comparison op)] in graph order."""
    from onnx import numpy_helper
    consts = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    consumers = collections.defaultdict(list)
    for n in m.graph.node:
        for i in n.input:
            consumers[i].append(n)
    out = []
    for n in m.graph.node:
        if n.op_type in ops and n.input[1] in consts and np.asarray(consts[n.input[1]]).size == 1:
            casts = [c for c in consumers[n.output[0]] if c.op_type == "Cast"]
            out.append((n.input[0], float(np.asarray(consts[n.input[1]]).reshape(-1)[0]), n.name,
                        casts[0].output[0] if casts else n.output[0], n.op_type))
    return out


_SESSIONS = {}


def ort_run(path_or_model, feeds, outputs, extra=()):
    """ONNX Runtime (CPU, optimisations off) with `extra` intermediate tensors as outputs
    (a golden-only copy of the graph; the committed file is untouched). Sessions are cached."""
    import onnx
    key = (path_or_model if isinstance(path_or_model, str) else id(path_or_model), tuple(extra))
    if key not in _SESSIONS:
        if extra:
            m = onnx.load(path_or_model) if isinstance(path_or_model, str) else path_or_model
            mm = onnx.shape_inference.infer_shapes(m)
            types = {v.name: v.type.tensor_type.elem_type for v in mm.graph.value_info}
            known = {o.name for o in mm.graph.output}
            for e in extra:
                if e not in known:
                    mm.graph.output.append(onnx.helper.make_tensor_value_info(
                        e, types.get(e) or onnx.TensorProto.FLOAT, None))
            _SESSIONS[key] = common.ort_session(mm)
        else:
            _SESSIONS[key] = common.ort_session(path_or_model)
    return _SESSIONS[key].run(list(outputs) + list(extra), feeds)


def write_goldens(name, path, preprocess, make_feeds, out_names, n_cases=4, note="",
                  candidates=GOLDEN_CANDIDATES, extra_meta=None):
    """ORT outputs on real frames -> tests/goldens/<name>/. `make_feeds(image path)` returns the
    feeds. Masks (the thresholded values, see mask_values) are stored as mask_<k>_<i>.npy from a
    golden-only copy with extra outputs; frames whose mask inputs lie within MIN_MARGIN of a
    threshold are skipped (a rounding flip would change everything downstream)."""
    import onnx
    import onnxruntime as ort
    m = onnx.load(path)
    mv = mask_values(m)
    extra = [t[0] for t in mv] + [t[3] for t in mv]
    out_dir = os.path.join(ROOT, "tests", "goldens", name)
    os.makedirs(out_dir, exist_ok=True)
    for f in os.listdir(out_dir):
        if f.endswith(".npy"):
            os.remove(os.path.join(out_dir, f))
    in_names = [i.name for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
    meta = {"model": os.path.relpath(path, ROOT), "inputs": in_names, "outputs": list(out_names),
            "masks": [], "tolerance_rel_l2": 1e-4,
            "graph_masks": {f"mask_{k}": {"tensor": t[3], "compare": t[2], "op": t[4], "of": t[0],
                                          "threshold": t[1]} for k, t in enumerate(mv)},
            "graph_masks_note": "mask_<k>_<i>.npy: the binary mask tensors inside the graph (not model "
                                "outputs), from ONNX Runtime on a copy with them as extra outputs",
            "preprocess": preprocess, "note": note,
            "reference": "onnxruntime CPUExecutionProvider, GraphOptimizationLevel.ORT_DISABLE_ALL",
            "onnxruntime": ort.__version__, "onnx": onnx.__version__, "cases": []}
    if extra_meta:
        meta.update(extra_meta)
    i = 0
    for img in candidates:
        feeds = make_feeds(os.path.join(ROOT, img))
        res = ort_run(path, feeds, out_names, extra)
        outs, vals = res[:len(out_names)], res[len(out_names):len(out_names) + len(mv)]
        masks = res[len(out_names) + len(mv):]
        margin = min([float(np.abs(v - t[1]).min()) for v, t in zip(vals, mv)] or [np.inf])
        if margin < MIN_MARGIN:
            print(f"{name}: skip {img} (mask margin {margin:.1e})")
            continue
        for n, a in feeds.items():
            np.save(os.path.join(out_dir, f"{n}_{i}.npy"), a)
        for n, o in zip(out_names, outs):
            np.save(os.path.join(out_dir, f"{n}_{i}.npy"), o.astype(np.float32))
        for k, mk in enumerate(masks):
            np.save(os.path.join(out_dir, f"mask_{k}_{i}.npy"), mk.astype(np.float32))
        dens = [float(np.asarray(mk, np.float32).mean()) for mk in masks]
        # "run" masks: 1 = compute (DynConv's Gumbel x >= 0, A-ViT's still-running c < 0.99)
        run = [d for d, t in zip(dens, mv) if t[4] in ("GreaterOrEqual", "Less")]
        meta["cases"].append({"index": i, "image": img, "mask_margin": margin if mv else None,
                              "run_mask_density_mean": float(np.mean(run)) if run else None,
                              "mask_density": dens})
        print(f"{name} golden {i} {img}: margin {margin:.1e}, mean run-mask density "
              f"{np.mean(run) if run else float('nan'):.3f}")
        i += 1
        if i == n_cases:
            break
    if i < n_cases:
        raise RuntimeError(f"{name}: only {i} frames with a mask margin >= {MIN_MARGIN}")
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    return meta


def report(name, path, m, n_params, in_shape, density, checks):
    """One JSON record per model beside the ONNX file (models/authors/<name>.json)."""
    rec = {"file": os.path.relpath(path, ROOT), "bytes": os.path.getsize(path), "params": int(n_params),
           "input_shape": list(in_shape), "mask_density_calibration": density,
           "ops": op_histogram(m), **checks}
    with open(os.path.splitext(path)[0] + ".json", "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    print(json.dumps({k: v for k, v in rec.items() if k != "ops"}))
    print("  ops:", " ".join(f"{k}:{v}" for k, v in rec["ops"].items()))
    return rec
