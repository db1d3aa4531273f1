#!/usr/bin/env python3
"""Make the shipped photo frames and the ONNX Runtime goldens for the committed models.

    python3 tests/goldens/make_goldens.py [--models cnn_small vit_small]

1. Photos: four scikit-image sample photos (public domain / CC0, see models/frames/README.md),
   resized with PIL bilinear to 224x224 (whole image, aspect ratio not kept) and written as PNG
   to models/frames/photos/<name>.png. These are the frames the README demo uses.
2. Per model (models/<model>.onnx): each PNG from step 1 is resized with PIL bilinear to the
   model's HxW, scaled to [0,1], normalised with the mean/std from the model's metadata
   (dynaspa.mean / dynaspa.std, ImageNet values), laid out NCHW, and saved as
   tests/goldens/<model>/input_<i>.npy (float32 [1,3,H,W]); ONNX Runtime (CPU, graph
   optimisations disabled) computes tests/goldens/<model>/logits_<i>.npy (float32). The result
   with all optimisations enabled must agree within 1e-5 relative L2.
   tests/goldens/<model>/meta.json records images, shapes, versions and top-5 classes.

Going through the 224x224 PNGs (instead of the original photos) makes the goldens reproducible
from the shipped frames alone.
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import PIL
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PHOTOS = ["astronaut", "chelsea", "coffee", "rocket"]  # order gives the index <i>
FRAME_SIZE = 224
TOL = 1e-5


def write_photos(out_dir):
    import skimage
    import skimage.data
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for name in PHOTOS:
        arr = getattr(skimage.data, name)()
        assert arr.ndim == 3 and arr.shape[2] == 3 and arr.dtype == np.uint8, (name, arr.shape)
        img = Image.fromarray(arr, "RGB").resize((FRAME_SIZE, FRAME_SIZE), Image.BILINEAR)
        path = os.path.join(out_dir, f"{name}.png")
        img.save(path, optimize=True)
        paths.append(path)
        print(f"frame {name}: {arr.shape[1]}x{arr.shape[0]} -> {FRAME_SIZE}x{FRAME_SIZE} {path}")
    return paths, skimage.__version__


def preprocess(png, h, w, mean, std):
    img = Image.open(png).convert("RGB").resize((w, h), Image.BILINEAR)
    x = np.asarray(img, dtype=np.float32) / 255.0                 # H,W,3 in [0,1]
    x = (x - mean) / std
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None]).astype(np.float32)  # 1,3,H,W


def session(path, optimize):
    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def make_model_goldens(model_name, pngs, out_root):
    path = os.path.join(ROOT, "models", f"{model_name}.onnx")
    model = onnx.load(path)
    props = {p.key: p.value for p in model.metadata_props}
    mean = np.array([float(v) for v in props["dynaspa.mean"].split(",")], np.float32)
    std = np.array([float(v) for v in props["dynaspa.std"].split(",")], np.float32)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    h, w = dims[2].dim_value, dims[3].dim_value
    ref, opt = session(path, False), session(path, True)
    out_dir = os.path.join(out_root, model_name)
    os.makedirs(out_dir, exist_ok=True)
    meta = {"model": f"models/{model_name}.onnx", "input": "input", "output": "logits",
            "input_shape": [1, 3, h, w], "mean": mean.tolist(), "std": std.tolist(),
            "preprocess": (f"models/frames/photos/<image>.png -> PIL bilinear resize to {w}x{h} "
                           "-> /255 -> (x-mean)/std -> NCHW float32"),
            "reference": "onnxruntime CPUExecutionProvider, GraphOptimizationLevel.ORT_DISABLE_ALL",
            "onnxruntime": ort.__version__, "pillow": PIL.__version__, "onnx": onnx.__version__,
            "tolerance_opt_vs_noopt_rel_l2": TOL, "cases": []}
    for i, png in enumerate(pngs):
        x = preprocess(png, h, w, mean, std)
        y = ref.run(["logits"], {"input": x})[0].astype(np.float32)
        y_opt = opt.run(["logits"], {"input": x})[0]
        rel = float(np.linalg.norm(y - y_opt) / np.linalg.norm(y))
        if not np.all(np.isfinite(y)) or rel > TOL:
            raise RuntimeError(f"{model_name} image {i}: finite={np.all(np.isfinite(y))} rel L2 {rel:.2e}")
        np.save(os.path.join(out_dir, f"input_{i}.npy"), x)
        np.save(os.path.join(out_dir, f"logits_{i}.npy"), y)
        top5 = np.argsort(-y[0])[:5].tolist()
        meta["cases"].append({"index": i, "image": os.path.relpath(png, ROOT),
                              "logits_shape": list(y.shape), "top5": top5,
                              "opt_vs_noopt_rel_l2": rel})
        print(f"{model_name} {i} {os.path.basename(png)}: logits std {y.std():.3f} "
              f"top5 {top5} opt-vs-noopt rel L2 {rel:.1e}")
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["cnn_small", "vit_small"])
    args = ap.parse_args()
    pngs, skv = write_photos(os.path.join(ROOT, "models", "frames", "photos"))
    print(f"(scikit-image {skv}, Pillow {PIL.__version__}, onnxruntime {ort.__version__})")
    for m in args.models:
        make_model_goldens(m, pngs, os.path.join(ROOT, "tests", "goldens"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
