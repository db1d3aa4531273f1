#!/usr/bin/env python3
"""Rebuild tests/classic/: stock exports of common vision models, their weight recipes and ONNX
Runtime goldens, for tests/classic_models.rs.

    python3 tests/classic/make.py                   # every model
    python3 tests/classic/make.py --only resnet18   # some

Needs torch, torchvision, timm, onnx, onnxscript, onnxruntime, numpy, pillow.

Each model is exported unchanged with both PyTorch exporters: TorchScript (`dynamo=False`) at
opset 17 and at one more opset, and dynamo (`dynamo=True`) at its default opset. The exports'
graphs are committed; their weights are not. Every float initializer of at least
`EXTERNAL_MIN` elements becomes external data in `weights.bin`, whose contents a recipe
(`<model>/recipe.json`) regenerates: per tensor a seed, a mean and a half-width, values
`mean + half * v` with `v` uniform in [-1, 1) from splitmix64 (`uniform` below; the test has
the same generator in Rust). Mean and half-width copy the exported tensor's mean and standard
deviation, so each layer's weights have the scale of the randomly initialised model's with
BatchNorm calibrated on real frames (but see CALIBRATED for the biases). Tensors that hold the same
values in several exports share one recipe entry, so the exports of a model compute the same
function and share goldens. Smaller initializers stay inline, as exported.

A model listed in CALIBRATED gets its generated conv weights calibrated on the photos
(calibrate.py): BatchNorm folded into a conv lives on in the conv's bias, which cancels the mean
of the *exported* weights' output; regenerated weights have other row sums, so without this its
activations grow layer after layer. Each calibrated conv gets a half-width per output channel
(mean 0) and a bias that give its output the mean and standard deviation of the exported
model's at the same node; its bias stays in the graph, whatever its size.

Goldens are ONNX Runtime's outputs on frame.png with the generated weights.
"""
import argparse
import glob
import json
import os
import shutil
import sys
import tempfile
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from calibrate import calibrate  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
PHOTOS = os.path.join(REPO, "models", "frames", "photos")
FRAME = "chelsea.png"
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
EXTERNAL_MIN = 256
ALIGN = 64
# Exports of one model whose outputs differ by less than this share a golden file.
SAME_GOLDEN = 1e-6


def splitmix_uniform(seed, n):
    """n values in [-1, 1): splitmix64 outputs 1..n of `seed`, top 24 bits, exact in float32."""
    with np.errstate(over="ignore"):
        i = np.arange(1, n + 1, dtype=np.uint64)
        z = np.uint64(seed) + i * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0**-24)
    return u * np.float32(2.0) - np.float32(1.0)


def generate(entry):
    """A tensor's values; a list of half-widths holds one per row (first dimension), rows equal."""
    v = splitmix_uniform(entry["seed"], entry["count"])
    half = entry["half"]
    if isinstance(half, list):
        half = np.repeat(np.array(half, np.float32), entry["count"] // len(half))
    return np.float32(entry["mean"]) + np.float32(half) * v


class UNet(torch.nn.Module):
    """A plain U-Net: three encoder levels, ConvTranspose and bilinear Resize upsampling,
    skip connections by concatenation, one output channel (a mask's logits)."""

    def __init__(self, c=16):
        super().__init__()

        def block(i, o):
            return torch.nn.Sequential(
                torch.nn.Conv2d(i, o, 3, padding=1), torch.nn.BatchNorm2d(o), torch.nn.ReLU(),
                torch.nn.Conv2d(o, o, 3, padding=1), torch.nn.BatchNorm2d(o), torch.nn.ReLU())

        self.enc1, self.enc2, self.enc3 = block(3, c), block(c, 2 * c), block(2 * c, 4 * c)
        self.up2 = torch.nn.ConvTranspose2d(4 * c, 2 * c, 2, stride=2)
        self.dec2 = block(4 * c, 2 * c)
        self.dec1 = block(3 * c, c)
        self.head = torch.nn.Conv2d(c, 1, 1)

    def forward(self, x):
        a = self.enc1(x)
        b = self.enc2(torch.nn.functional.max_pool2d(a, 2))
        c = self.enc3(torch.nn.functional.max_pool2d(b, 2))
        d = self.dec2(torch.cat([self.up2(c), b], 1))
        u = torch.nn.functional.interpolate(d, scale_factor=2.0, mode="bilinear", align_corners=False)
        return self.head(self.dec1(torch.cat([u, a], 1)))


def tv(name):
    def make():
        import torchvision
        return getattr(torchvision.models, name)()
    return make


def tm(name):
    def make():
        import timm
        return timm.create_model(name)
    return make


# name -> (constructor, origin, license, the TorchScript exports' second opset)
MODELS = {
    "resnet18": (tv("resnet18"), "torchvision.models.resnet18", "BSD-3-Clause", 13),
    "resnet50": (tv("resnet50"), "torchvision.models.resnet50", "BSD-3-Clause", 13),
    "mobilenet_v2": (tv("mobilenet_v2"), "torchvision.models.mobilenet_v2", "BSD-3-Clause", 13),
    "mobilenet_v3_large": (tv("mobilenet_v3_large"), "torchvision.models.mobilenet_v3_large", "BSD-3-Clause", 13),
    "efficientnet_b0": (tv("efficientnet_b0"), "torchvision.models.efficientnet_b0", "BSD-3-Clause", 13),
    "convnext_tiny": (tv("convnext_tiny"), "torchvision.models.convnext_tiny", "BSD-3-Clause", 13),
    "regnet_y_400mf": (tv("regnet_y_400mf"), "torchvision.models.regnet_y_400mf", "BSD-3-Clause", 13),
    # scaled_dot_product_attention exports from opset 14 on.
    "deit_small": (tm("deit_small_patch16_224"), "timm deit_small_patch16_224", "Apache-2.0", 14),
    "swin_tiny": (tm("swin_tiny_patch4_window7_224"), "timm swin_tiny_patch4_window7_224", "Apache-2.0", 13),
    "unet": (UNet, "tests/classic/make.py UNet (written here)", "this repository's license", 13),
}

# Models whose generated conv weights are calibrated (see above). RegNetY-400MF without it: its
# activations reach 1e3 and its squeeze-excite logits 1e2, and two float32 runtimes (ONNX
# Runtime with and without graph optimisations) differ by 6e-4 rel L2 (the exported model:
# 3e-6). The other models' exports agree with ONNX Runtime within 5e-5 without it.
CALIBRATED = {"regnet_y_400mf"}


def frame(path):
    """Normalised NCHW float32, computed as the Rust test computes it (src/io/image.rs)."""
    px = np.asarray(Image.open(path).convert("RGB"), dtype=np.float32)
    x = (px / np.float32(255.0) - MEAN) / STD
    return x.transpose(2, 0, 1)[None].astype(np.float32)


def photos():
    """Every photo as one batch: what BatchNorm and the generated weights are calibrated on."""
    return np.concatenate([frame(p) for p in sorted(glob.glob(os.path.join(PHOTOS, "*.png")))])


def calibrate_batchnorm(model):
    """Running statistics from the real photos (one batch, exact averages), so the random
    initialisation gives activations of the scale a trained model has."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    batch = torch.from_numpy(photos())
    model.eval()
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
        m.train()
    with torch.no_grad():
        model(batch)
    model.eval()


def export(model, exporter, opset, path):
    x = torch.from_numpy(frame(os.path.join(PHOTOS, FRAME)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "torchscript":
            torch.onnx.export(model, (x,), path, dynamo=False, opset_version=opset)
        else:
            torch.onnx.export(model, (x,), path, dynamo=True)


class Recipe:
    def __init__(self, model_index):
        self.entries = []
        self.values = []
        self.size = 0
        self.seed_base = (model_index + 1) << 32

    def place(self, arr):
        """The recipe entry for an exported tensor: an earlier one with the same values, or a new one."""
        flat = arr.reshape(-1)
        for e, v in zip(self.entries, self.values):
            if v.size == flat.size and np.allclose(v, flat, rtol=1e-5, atol=1e-7):
                return e
        mean, std = float(flat.mean(dtype=np.float64)), float(flat.std(dtype=np.float64))
        e = {
            "seed": self.seed_base + len(self.entries),
            "count": int(flat.size),
            "offset": self.size,
            "mean": float(np.float32(mean)),
            "half": float(np.float32(std * np.sqrt(3.0))),
        }
        if arr.ndim == 4:
            # Conv weights with BatchNorm folded in scale each output channel by its own factor
            # (depthwise ones by up to 100x); one half-width for all would blow activations up.
            rows = arr.reshape(arr.shape[0], -1).std(axis=1, dtype=np.float64) * np.sqrt(3.0)
            if rows.max() > 1.5 * max(np.median(rows), 1e-30):
                e["half"] = [float(np.float32(f"{h:.4g}")) for h in rows]
        self.size += (4 * flat.size + ALIGN - 1) // ALIGN * ALIGN
        self.entries.append(e)
        self.values.append(flat.copy())
        return e

    def entry_of(self, model, t):
        """The entry initializer `t` of `model` is placed by, or None when it is inline."""
        if t.data_location != onnx.TensorProto.EXTERNAL:
            return None
        offset = int(next(kv.value for kv in t.external_data if kv.key == "offset"))
        return next(e for e in self.entries if e["offset"] == offset)

    def write_weights(self, path):
        buf = np.zeros(self.size // 4, np.float32)
        for e in self.entries:
            o = e["offset"] // 4
            buf[o:o + e["count"]] = generate(e)
        buf.tofile(path)


def externalise(src, recipe, calibrated):
    """An export with every large float initializer made external data placed by `recipe`; with
    `calibrated`, the biases of convs stay inline (calibration sets them)."""
    m = onnx.load(src, load_external_data=True)
    inline = {n.input[2] for n in m.graph.node if n.op_type == "Conv" and len(n.input) > 2} if calibrated else set()
    n_ext = 0
    for t in m.graph.initializer:
        if t.data_type != onnx.TensorProto.FLOAT or t.name in inline:
            continue
        arr = numpy_helper.to_array(t)
        if arr.size < EXTERNAL_MIN:
            continue
        e = recipe.place(arr)
        t.ClearField("raw_data")
        t.ClearField("float_data")
        del t.external_data[:]
        t.data_location = onnx.TensorProto.EXTERNAL
        for k, v in (("location", "weights.bin"), ("offset", str(e["offset"])), ("length", str(4 * e["count"]))):
            kv = t.external_data.add()
            kv.key, kv.value = k, v
        n_ext += 1
    # The dynamo exporter annotates every node with its Python stack (up to 1 MB per model);
    # the annotations do not change the graph.
    for node in m.graph.node:
        del node.metadata_props[:]
        node.ClearField("doc_string")
    for t in m.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            # Inline tensors of a dynamo export were external too; bring them back into the file.
            if len(t.external_data):
                raise SystemExit(f"{src}: initializer {t.name} still refers to external data")
    return m, n_ext


def rel_l2(a, b):
    return float(np.linalg.norm((a - b).astype(np.float64)) / max(np.linalg.norm(b.astype(np.float64)), 1e-30))


def build(name, index):
    make, origin, license_, opset2 = MODELS[name]
    torch.manual_seed(index)
    model = make().eval()
    calibrate_batchnorm(model)
    out = os.path.join(HERE, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    recipe = Recipe(index)
    exports = []
    graphs = []
    with tempfile.TemporaryDirectory() as tmp:
        for exporter, opset in (("torchscript", 17), ("torchscript", opset2), ("dynamo", None)):
            tag = f"{exporter}{opset}" if opset else exporter
            raw = os.path.join(tmp, tag, "model.onnx")
            os.makedirs(os.path.dirname(raw))
            export(model, exporter, opset, raw)
            m, n_ext = externalise(raw, recipe, name in CALIBRATED)
            graphs.append(m)
            declared = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
            inits = {t.name for t in m.graph.initializer}
            inputs = [i.name for i in m.graph.input if i.name not in inits]
            exports.append({
                "file": f"{tag}.onnx",
                "exporter": exporter,
                "opset": declared,
                "input": inputs[0],
                "output": m.graph.output[0].name,
                "external_tensors": n_ext,
                "nodes": len(m.graph.node),
            })
        if name in CALIBRATED:
            first = onnx.load(os.path.join(tmp, "torchscript17", "model.onnx"))
            n = calibrate(first, graphs, recipe.entry_of, generate, splitmix_uniform, photos())
            print(f"{name}: {n} convs calibrated", flush=True)
        for e, m in zip(exports, graphs):
            with open(os.path.join(out, e["file"]), "wb") as f:
                f.write(m.SerializeToString())
        weights = os.path.join(out, "weights.bin")
        recipe.write_weights(weights)
        x = frame(os.path.join(PHOTOS, FRAME))
        goldens = []
        for e in exports:
            s = ort.InferenceSession(os.path.join(out, e["file"]), providers=["CPUExecutionProvider"])
            y = s.run(None, {e["input"]: x})[0].astype(np.float32)
            assert np.isfinite(y).all(), f"{name} {e['file']}: non-finite output"
            assert y.std() > 1e-3 * max(np.abs(y).max(), 1e-30), f"{name} {e['file']}: degenerate output"
            for g_name, g in goldens:
                if g.shape == y.shape and rel_l2(y, g) < SAME_GOLDEN:
                    e["golden"] = g_name
                    break
            else:
                g_name = f"golden_{len(goldens)}.npy"
                goldens.append((g_name, y))
                np.save(os.path.join(out, g_name), y)
                e["golden"] = g_name
            e["ort_vs_golden_rel_l2"] = rel_l2(y, dict(goldens)[e["golden"]])
            print(f"{name:20s} {e['file']:20s} opset {e['opset']:2d} ext {e['external_tensors']:3d} "
                  f"nodes {e['nodes']:4d} golden {e['golden']} out {list(y.shape)} std {y.std():.3g}", flush=True)
        os.remove(weights)
    meta = {
        "origin": origin,
        "license": license_,
        "frame": f"models/frames/photos/{FRAME}",
        "mean": [float(v) for v in MEAN],
        "std": [float(v) for v in STD],
        "weights_bytes": recipe.size,
        "exports": exports,
    }
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    with open(os.path.join(out, "recipe.json"), "w") as f:
        json.dump({"file": "weights.bin", "tensors": recipe.entries}, f, separators=(",", ":"))
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", choices=list(MODELS), help="rebuild only these models")
    args = ap.parse_args()
    for i, name in enumerate(MODELS):
        if args.only and name not in args.only:
            continue
        build(name, i)


if __name__ == "__main__":
    sys.exit(main())
