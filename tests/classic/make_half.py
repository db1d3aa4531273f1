"""Rebuild tests/classic/half/: stock PyTorch exports of models converted with `model.half()`,
so every initializer, the input and the output are FLOAT16 in the file.

`tests/classic_models.rs` loads each one on the CPU backend, which widens half-precision values
at load and computes in fp32, and compares its output on a real frame (float32) with ONNX
Runtime's output for the same graph widened the same way here (`widen`: every FLOAT16 tensor,
type and cast made FLOAT; `golden_<export>.npy`): relative L2 error at most 1e-4. meta.json
also records how far ONNX Runtime running the FLOAT16 file itself (half-precision input) lands
from that golden.

Weights are random (`torch.manual_seed`) with BatchNorm statistics calibrated on the four
photos, as in make.py, and stay inline (the models are small). Needs torch, torchvision, onnx,
onnxscript, onnxruntime, numpy, pillow:

    python3 tests/classic/make_half.py
"""

import json
import os
import sys
import tempfile
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from onnx import numpy_helper  # noqa: E402
from make import FRAME, PHOTOS, UNet, calibrate_batchnorm, frame, rel_l2  # noqa: E402

OUT = os.path.join(HERE, "half")


def mobilenet_v2_narrow():
    import torchvision
    return torchvision.models.mobilenet_v2(width_mult=0.35, num_classes=100)


# name -> (constructor, origin, license, exporters)
MODELS = {
    "mobilenet_v2_w035": (mobilenet_v2_narrow, "torchvision.models.mobilenet_v2(width_mult=0.35, num_classes=100)",
                          "BSD-3-Clause", ("torchscript",)),
    "unet": (UNet, "tests/classic/make.py UNet (written there)", "this repository's license", ("torchscript", "dynamo")),
}


def export(model, exporter, path):
    x = torch.from_numpy(frame(os.path.join(PHOTOS, FRAME))).half()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "torchscript":
            torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17)
        else:
            torch.onnx.export(model, (x,), path, dynamo=True)
    m = onnx.load(path, load_external_data=True)
    for n in m.graph.node:
        del n.metadata_props[:]
        n.doc_string = ""
    return m


def widen(m):
    """The graph with every FLOAT16 value made FLOAT (values widened exactly)."""
    F16, F32 = onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT

    def tensor(t):
        if t.data_type == F16:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))

    m = onnx.ModelProto.FromString(m.SerializeToString())
    for t in m.graph.initializer:
        tensor(t)
    for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        if vi.type.tensor_type.elem_type == F16:
            vi.type.tensor_type.elem_type = F32
    for n in m.graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                tensor(a.t)
            if n.op_type == "Cast" and a.name == "to" and a.i == F16:
                a.i = F32
    return m


def main():
    os.makedirs(OUT, exist_ok=True)
    x = frame(os.path.join(PHOTOS, FRAME))
    meta = {"frame": f"models/frames/photos/{FRAME}", "exports": []}
    for index, (name, (make, origin, license_, exporters)) in enumerate(MODELS.items()):
        torch.manual_seed(100 + index)
        model = make().eval()
        calibrate_batchnorm(model)
        with torch.no_grad():
            y32 = model(torch.from_numpy(x)).numpy()
        model = model.half()
        goldens = []
        for exporter in exporters:
            file = f"{name}_{exporter}.onnx"
            with tempfile.TemporaryDirectory() as tmp:
                m = export(model, exporter, os.path.join(tmp, "model.onnx"))
            onnx.save(m, os.path.join(OUT, file))
            s = ort.InferenceSession(os.path.join(OUT, file), providers=["CPUExecutionProvider"])
            inp = s.get_inputs()[0].name
            y16 = s.run(None, {inp: x.astype(np.float16)})[0].astype(np.float32)
            w = ort.InferenceSession(widen(m).SerializeToString(), providers=["CPUExecutionProvider"])
            y = w.run(None, {inp: x})[0]
            assert y.dtype == np.float32 and np.isfinite(y).all() and y.std() > 1e-3 * np.abs(y).max(), f"{file}: degenerate output"
            # Exports of one model whose goldens agree within 1e-6 share the first one's file.
            golden = next((g for g, v in goldens if v.shape == y.shape and rel_l2(y, v) < 1e-6), None)
            if golden is None:
                golden = f"golden_{name}_{exporter}.npy"
                np.save(os.path.join(OUT, golden), y)
                goldens.append((golden, y))
            e = {"file": file, "origin": origin, "license": license_, "exporter": exporter,
                 "input": inp, "output": s.get_outputs()[0].name, "golden": golden,
                 "ort_fp16_vs_golden_rel_l2": rel_l2(y16, y), "torch_fp32_model_vs_golden_rel_l2": rel_l2(y32, y)}
            meta["exports"].append(e)
            print(f"{file:36s} out {list(y.shape)} ORT fp16 vs golden {e['ort_fp16_vs_golden_rel_l2']:.2e} "
                  f"torch fp32 (unrounded weights) vs golden {e['torch_fp32_model_vs_golden_rel_l2']:.2e}", flush=True)
    with open(os.path.join(OUT, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
