"""Export the model of RESULTS.md's "Delta mode on a still camera": torchvision's ResNet-18 at
1x3x480x640 (random weights, BatchNorm statistics from the first vtest frames, so activations
have a trained model's scale), TorchScript exporter, opset 17.

    python3 benches/delta_model.py [--out target/delta/resnet18_480x640.onnx] [--frames DIR]

Needs torch, torchvision, numpy, pillow and ffmpeg (frames are decoded from opencv-doc's
vtest.avi; --frames takes the first 8 images of a folder instead, for a machine without them).
"""

import argparse
import os
import subprocess
import tempfile

import numpy as np
import torch
import torchvision
from PIL import Image

VTEST = "/usr/share/doc/opencv-doc/examples/data/vtest.avi"
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def normalised(paths, w, h):
    xs = [(np.asarray(Image.open(p).convert("RGB").resize((w, h)), np.float32) / 255 - MEAN) / STD for p in paths]
    return torch.from_numpy(np.stack(xs).transpose(0, 3, 1, 2).copy())


def frames(n, w, h, folder=None):
    if folder:
        return normalised([os.path.join(folder, f) for f in sorted(os.listdir(folder))[:n]], w, h)
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["ffmpeg", "-loglevel", "error", "-i", VTEST, "-frames:v", str(n), "-vf", f"scale={w}:{h}",
                        os.path.join(d, "f%03d.png")], check=True)
        return normalised([os.path.join(d, f) for f in sorted(os.listdir(d))], w, h)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="target/delta/resnet18_480x640.onnx")
    ap.add_argument("--frames", help="calibrate BatchNorm on the first 8 images of this folder")
    a = ap.parse_args()
    torch.manual_seed(0)
    m = torchvision.models.resnet18().eval()
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.reset_running_stats()
            mod.momentum = None
            mod.train()
    with torch.no_grad():
        m(frames(8, 640, 480, a.frames))
    m.eval()
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    torch.onnx.export(m, (torch.randn(1, 3, 480, 640),), a.out, dynamo=False, opset_version=17)
    print(a.out)


if __name__ == "__main__":
    main()
