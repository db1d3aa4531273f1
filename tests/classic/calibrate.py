"""Per-channel calibration of generated conv weights, for tests/classic/make.py.

A model whose BatchNorm the exporter folded into its convs keeps BatchNorm's work in each conv's
bias: it subtracts the mean that the conv's *exported* weights produce on real frames. Weights
regenerated from a recipe have other row sums, so that bias no longer cancels anything: every
layer adds per-channel offsets of the size of its output, activations grow layer after layer
(RegNetY-400MF's reach a thousand, its squeeze-excite logits hundreds) and the sigmoid gates
turn float rounding into visible output differences.

`calibrate` redoes BatchNorm's calibration on the generated weights: in graph order, each Conv
with a generated weight and a bias gets, per output channel, a half-width and a bias that give
its output on the calibration frames the mean and standard deviation the exported model's
output has there. Its recipe entry becomes mean 0 with one half-width per row, and its bias is
stored in the graph (a generator cannot reproduce it).
"""
import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import helper, numpy_helper


def _run(model, names, batch):
    """The values `names` of `model` (a ModelProto with all data inline) on `batch`."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.output[:]
    for n in names:
        m.graph.output.append(helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    # One frame at a time: the exports take a batch of one.
    runs = [s.run(None, {model.graph.input[0].name: batch[i:i + 1]}) for i in range(len(batch))]
    return {n: np.concatenate([r[k] for r in runs]) for k, n in enumerate(names)}


def _channel_stats(y):
    """Mean and standard deviation of each channel (axis 1) over the other axes, in float64."""
    y = np.moveaxis(np.asarray(y, np.float64), 1, 0).reshape(y.shape[1], -1)
    return y.mean(axis=1), y.std(axis=1)


def _conv(x, w, node):
    """ONNX Conv of x by w without bias, in float64."""
    a = {at.name: helper.get_attribute_value(at) for at in node.attribute}
    if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise SystemExit(f"calibrate: {node.name} uses auto_pad")
    k = len(w.shape) - 2
    pads = a.get("pads", [0] * (2 * k))
    # F.pad takes (begin, end) pairs from the last axis backwards.
    pad = [p for d in reversed(range(k)) for p in (pads[d], pads[d + k])]
    conv = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d}[k]
    return conv(torch.nn.functional.pad(torch.from_numpy(x).double(), pad), torch.from_numpy(w).double(),
                stride=a.get("strides", [1] * k), dilation=a.get("dilations", [1] * k),
                groups=a.get("group", 1)).numpy()


def calibrate(exported, models, entry_of, generate, uniform, batch):
    """Calibrates the generated weights of `models` (ModelProtos whose large initializers are
    external data placed by recipe entries; changed in place) against `exported` (the first
    model's export with its own weights, all inline) on `batch`. `entry_of(model, tensor)` is the
    recipe entry of an external tensor (None if inline); `generate(entry)` its values and
    `uniform(seed, count)` the generator's draws. Entries are changed in place, so every model
    that shares them sees the same weights; each model's biases of the calibrated convs are
    set to the same values. Returns the number of convs calibrated."""
    first = models[0]
    inits = {t.name: t for t in first.graph.initializer}
    convs = [n for n in first.graph.node
             if n.op_type == "Conv" and len(n.input) > 2 and n.input[2]
             and entry_of(first, inits[n.input[1]]) is not None and entry_of(first, inits[n.input[2]]) is None]
    targets = _run(exported, [n.output[0] for n in convs], batch)

    # The first model with its data inline, updated as the convs are calibrated one by one.
    work = onnx.ModelProto()
    work.CopyFrom(first)
    winits = {t.name: t for t in work.graph.initializer}
    for t in work.graph.initializer:
        e = entry_of(first, inits[t.name])
        if e is not None:
            _set(t, generate(e).reshape(tuple(t.dims)))

    biases = {}  # recipe seed of a calibrated weight -> its conv's bias
    for n in convs:
        e = entry_of(first, inits[n.input[1]])
        if e["seed"] in biases:
            raise SystemExit(f"calibrate: {n.name} shares its weight with another conv")
        shape = tuple(inits[n.input[1]].dims)
        x = batch if n.input[0] == first.graph.input[0].name else _run(work, [n.input[0]], batch)[n.input[0]]
        v = uniform(e["seed"], e["count"]).astype(np.float64).reshape(shape)
        mu_v, sd_v = _channel_stats(_conv(x, v, n))
        mu_t, sd_t = _channel_stats(targets[n.output[0]])
        # A channel the generated weights leave constant keeps a unit half-width: nothing to match.
        scale = np.where(sd_v > 0, sd_t / np.where(sd_v > 0, sd_v, 1.0), 1.0)
        e["mean"] = 0.0
        # Four significant digits keep recipe.json small; the bias is fitted to them as rounded
        # to float32, as the generators read them.
        e["half"] = [float(f"{h:.4g}") for h in scale]
        half = np.array(e["half"], np.float32).astype(np.float64)
        bias = (mu_t - half * mu_v).astype(np.float32)
        biases[e["seed"]] = bias
        _set(winits[n.input[1]], generate(e).reshape(shape))
        _set(winits[n.input[2]], bias)

    for m in models:
        mi = {t.name: t for t in m.graph.initializer}
        for n in m.graph.node:
            if n.op_type != "Conv" or len(n.input) < 3 or not n.input[2]:
                continue
            e = entry_of(m, mi[n.input[1]])
            if e is not None and e["seed"] in biases:
                b = mi[n.input[2]]
                if entry_of(m, b) is not None:
                    raise SystemExit(f"calibrate: bias {b.name} of {n.name} is external data")
                _set(b, biases[e["seed"]])
    return len(convs)


def _set(t, values):
    """Initializer `t` holds `values` (float32), inline."""
    t.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(values, np.float32).reshape(tuple(t.dims)), t.name))
