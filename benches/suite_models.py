"""The models of the whole-model suite (benches/suite.py): how each is built and calibrated, how
it is exported, and how PyTorch gets it back from the files `suite.py export` writes.

    dynconv_cam        DynConv-style masked residual net at 480x640 (defined here)
    dynconv_cam_s      the same network at 160x224
    dynconv_r50_stock  the authors' DynConv resnet50(sparse=True), width 1.0, 224x224
    dynconv_r50_w025   the same at width 0.25 (as models/authors/dynconv_resnet50_w025.onnx)
    dynconv_full       models/dynconv.py, full size (ResNet-50 layout), density 0.3
    avit_full          models/avit.py, full size (DeiT-S), density 0.3
    sige_full          models/sige.py, full size, with the edit mask of benches/models.py
    resnet50, resnet18, mobilenet_v2   torchvision, random weights, dense

Every model is built once (the slow part: calibration on real frames), its state_dict saved
beside its ONNX export, and rebuilt for timing from the architecture plus that state_dict.

dynconv_cam: stem 3x3/s2 3->32 + BN + ReLU, 3x3/s2 32->64 + BN + ReLU (120x160 at 480x640),
then three stages of two masked residual blocks at 64, 128 and 256 channels, stages 2 and 3
opening with a dense 3x3/s2 conv + BN + ReLU; global average pool, Linear(256, 1000). A block's
mask unit is written the way DynConv-style code usually is: hard = (AvgPool3x3(conv1x1(x)) > 0)
.float(), mask = MaxPool3x3/s1(hard) (dilated), and the mask multiplies once, at the end:
out = relu(x + mask * bn2(conv2(relu(bn1(conv1(x)))))). Nothing in the graph says which
positions the two 3x3 convs need; the runtime infers it (DESIGN.md, "How masks are found").
Weights: He convs and near-identity BN affines (models/authors' initialisation), BN running
statistics from the calibration frames in graph order, each mask unit's 1x1 conv fitted to the
frames' saliency and its bias set, in graph order with the earlier masks active, so its hard
mask's mean density over the calibration frames is 0.3; the classifier is scaled to a logit std
of ~2 (models/authors/calib.py and dynconv_authors.py do each step).
"""
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "models"), os.path.join(ROOT, "models", "authors")]
import calib  # noqa: E402  (models/authors/calib.py)
import common  # noqa: E402  (models/common.py)

DENSITY = 0.3


def family(name):
    """models/<name>.py under its own module name: the authors' DynConv checkout has a package
    called `dynconv` too, which an earlier build may have imported."""
    import importlib.util
    key = f"family_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, os.path.join(ROOT, "models", f"{name}.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return sys.modules[key]
CAM_SEED = 20250101
CAM_STAGES = (64, 128, 256)


# ------------------------------------------------------------------------------------------------
# dynconv_cam
# ------------------------------------------------------------------------------------------------
def _cam_classes():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def conv_bn(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    class MaskedBlock(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.mask_conv = nn.Conv2d(c, 1, 1)
            self.mask_pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
            self.conv1 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)

        def forward(self, x):
            hard = (self.mask_pool(self.mask_conv(x)) > 0).float()
            mask = F.max_pool2d(hard, 3, 1, 1)
            body = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
            return F.relu(x + mask * body)

    class DynConvCam(nn.Module):
        def __init__(self, stages=CAM_STAGES, per_stage=2, classes=1000):
            super().__init__()
            self.stem = nn.Sequential(conv_bn(3, 32, 2), conv_bn(32, stages[0], 2))
            layers, cin = [], stages[0]
            for i, c in enumerate(stages):
                if i:
                    layers.append(conv_bn(cin, c, 2))
                layers += [MaskedBlock(c) for _ in range(per_stage)]
                cin = c
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(cin, classes)

        def blocks(self):
            return [m for m in self.layers if isinstance(m, MaskedBlock)]

        def forward(self, x):
            x = self.layers(self.stem(x))
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    return MaskedBlock, DynConvCam


def cam_module():
    import torch
    _, DynConvCam = _cam_classes()
    torch.manual_seed(CAM_SEED)
    return DynConvCam().eval()


def calibrated_cam(h, w, density=DENSITY):
    import torch
    import dynconv_authors as da
    net = cam_module()
    blocks = net.blocks()
    da.init_weights(net, CAM_SEED, [b.bn2 for b in blocks])
    for b in blocks:
        da.set_dense(b.mask_conv)
    imgs, _ = calib.calibration_set(h, w)
    x = torch.from_numpy(common.to_input(imgs, common.IMAGENET_MEAN, common.IMAGENET_STD))
    sal = [common.saliency(im) for im in imgs]
    for i, b in enumerate(blocks):
        feats = calib.capture_input(net, b.mask_conv, net, x)
        r2, _ = da.fit_mask_conv(b.mask_conv, feats, sal, density)
        # The threshold applies after the average pool (count_include_pad off, so a bias shift
        # passes through it unchanged): move the bias to the pooled logit's (1 - d) quantile.
        with torch.no_grad():
            z = b.mask_pool(b.mask_conv(feats.float())).double().reshape(-1).numpy()
        thr = float(np.quantile(z, 1.0 - density))
        b.mask_conv.bias.data -= thr
        print(f"  mask unit {i}: {feats.shape[1]} ch at {feats.shape[2]}x{feats.shape[3]}, ridge R^2 {r2:.2f}",
              flush=True)
    calib.full_bn_pass(net, net, x)
    da.calibrate_head(net.fc, net, x)
    return net


# ------------------------------------------------------------------------------------------------
# The registry
# ------------------------------------------------------------------------------------------------
IMAGENET = {"dynaspa.mean": ",".join(map(str, common.IMAGENET_MEAN)),
            "dynaspa.std": ",".join(map(str, common.IMAGENET_STD))}

# name: (h, w, family, sparse, how the ONNX batch is laid out: "symbolic" one file, "fixed" a
# file per batch size)
SPECS = {
    "dynconv_cam": dict(h=480, w=640, kind="cam", sparse=True, batch="symbolic"),
    "dynconv_cam_s": dict(h=160, w=224, kind="cam", sparse=True, batch="symbolic"),
    "dynconv_r50_stock": dict(h=224, w=224, kind="authors", width=1.0, sparse=True, batch="fixed"),
    "dynconv_r50_w025": dict(h=224, w=224, kind="authors", width=0.25, sparse=True, batch="fixed"),
    "dynconv_full": dict(h=224, w=224, kind="dynconv", sparse=True, batch="symbolic"),
    "avit_full": dict(h=224, w=224, kind="avit", sparse=True, batch="symbolic"),
    "sige_full": dict(h=168, w=224, kind="sige", sparse=True, batch="symbolic"),
    "resnet50": dict(h=224, w=224, kind="torchvision", sparse=False, batch="symbolic"),
    "resnet18": dict(h=224, w=224, kind="torchvision", sparse=False, batch="symbolic"),
    "mobilenet_v2": dict(h=224, w=224, kind="torchvision", sparse=False, batch="symbolic"),
}
GPU_SUITE = ["dynconv_cam", "dynconv_cam_s", "dynconv_r50_stock", "dynconv_r50_w025", "dynconv_full",
             "avit_full", "sige_full", "resnet50"]
CPU_SUITE = GPU_SUITE + ["resnet18", "mobilenet_v2"]


def _torchvision(name):
    import torch
    import torchvision
    torch.manual_seed(0)
    return getattr(torchvision.models, name)(weights=None).eval()


def architecture(name, dynconv_repo=None):
    """The model's module with random (uncalibrated) weights, and its forward wrapper (what
    PyTorch times and what is exported). The wrapper's state_dict is what export saves."""
    import dynconv_authors as da
    avit, dynconv, sige = family("avit"), family("dynconv"), family("sige")
    s = SPECS[name]
    if s["kind"] == "cam":
        return cam_module()
    if s["kind"] == "authors":
        if not dynconv_repo:
            sys.exit(f"suite: {name} needs --dynconv-repo (a checkout of github.com/thomasverelst/dynconv)")
        return da.resnet(dynconv_repo, "resnet50", s["width"])[1]
    if s["kind"] == "dynconv":
        return dynconv.DynConvResNet(dynconv.CONFIGS["full"]).eval()
    if s["kind"] == "avit":
        return avit.AViT(avit.CONFIGS["full"]).eval()
    if s["kind"] == "sige":
        return sige.Generator(sige.CONFIGS["full"]).eval()
    return _torchvision(name)


def build(name, dynconv_repo=None):
    """Builds and calibrates a model. Returns (module, ONNX metadata, input names, output names)."""
    import dynconv_authors as da
    avit, dynconv, sige = family("avit"), family("dynconv"), family("sige")
    s = SPECS[name]
    src = f"benches/suite_models.py {name}"
    if s["kind"] == "cam":
        net = calibrated_cam(s["h"], s["w"])
        return net, {**IMAGENET, "dynaspa.source": f"{src} (synthetic weights, fixed seed, calibrated on models/frames)"}, \
            ["input"], ["logits"]
    if s["kind"] == "authors":
        if not dynconv_repo:
            sys.exit(f"suite: {name} needs --dynconv-repo (a checkout of github.com/thomasverelst/dynconv)")
        wrap, _, _, origin = da.calibrated_resnet(dynconv_repo, "resnet50", DENSITY, s["width"],
                                                  max_rows=4096 if s["width"] >= 1.0 else None)
        return wrap, {**IMAGENET, "dynaspa.source": f"{src}: {origin['repo']}@{origin['commit'][:12]} {origin['file']} "
                      f"{origin['class']}", "dynaspa.license": origin["license"]}, ["input"], ["logits"]
    if s["kind"] == "dynconv":
        m, _ = dynconv.calibrated("full", DENSITY)
        names = [f"mask_{n}_{bi}{suf}" for n, bi, _ in m.sparse_blocks() for suf in ("", "_dil")]
        return m, {**IMAGENET, "dynaspa.source": f"{src}: models/dynconv.py full, density {DENSITY}"}, \
            ["input"], ["logits"] + names
    if s["kind"] == "avit":
        m, _ = avit.calibrated("full", DENSITY)
        return m, {**IMAGENET, "dynaspa.token_grid": f"{m.gh}x{m.gw}",
                   "dynaspa.source": f"{src}: models/avit.py full, density {DENSITY}"}, \
            ["input"], ["logits"] + [f"mask_blocks_{i}" for i in range(1, avit.CONFIGS["full"]["depth"])]
    if s["kind"] == "sige":
        m, _, _, _ = sige.calibrated("full")
        return m, {"dynaspa.mean": ",".join(map(str, sige.MEAN)), "dynaspa.std": ",".join(map(str, sige.STD)),
                   "dynaspa.mask_input": "mask", "dynaspa.fill": "cached",
                   "dynaspa.source": f"{src}: models/sige.py full"}, ["input", "mask"], ["output", "mask_r0", "mask_r1", "mask_r2"]
    return _torchvision(name), {**IMAGENET, "dynaspa.source": f"{src}: torchvision.models.{name}(weights=None)"}, \
        ["input"], ["logits"]


def sige_mask(batch):
    """benches/models.py's full-size SIGE edit mask (density 0.3), repeated over the batch."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_models", os.path.join(ROOT, "benches", "models.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return np.repeat(mod.sige_mask(), batch, axis=0)


def export(module, name, path, inputs, in_names, out_names, props, batch):
    """ONNX export at opset 17 with the TorchScript exporter. Symbolic-batch models go through
    models/common.py's export (op list and shape checks); the authors' code is exported stock
    (models/authors/calib.py, fixed shapes) once per batch size."""
    import torch
    args = tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in inputs)
    doc = f"{name}: the whole-model suite (benches/suite_models.py)"
    if SPECS[name]["batch"] == "symbolic":
        return common.export(module, args, path, in_names, out_names, props, doc)
    return calib.export(module, args, path, in_names, out_names, props, doc)
