"""DynConv (Verelst & Tuytelaars, CVPR 2020) exported stock from the authors' own code.

Imports thomasverelst/dynconv from a checkout given with --repo (nothing of it is copied here):
  git clone https://github.com/thomasverelst/dynconv && git -C dynconv checkout 19e4c583b841a372b8d2eed11fa6b6139888b499

Models (random weights, calibrated on real frames; see models/authors/README.md):
  dynconv_resnet50_w025  classification/models/resnet_224x224.py resnet50(sparse=True, width_mult=0.25), 224x224
  dynconv_resnet18_w025  classification/models/resnet_224x224.py resnet18(sparse=True, width_mult=0.25), 224x224
  dynconv_hourglass_f48  pose/lib/models/hourglass_mn.py get_pose_net, pose/experiments/4stack/s025.yaml
                         with MODEL.EXTRA.NUM_FEATURES 48 (stock 96), 4 stacks, 128x128 input (stock 256)

All in eval mode, so the authors' Gumbel module thresholds with `(x >= 0).float()` (exported as
GreaterOrEqual + Cast). The classification models run unchanged. The pose model needs shims,
because its eval path calls CUDA kernels through cupy:
  1. a stub `cupy` module is registered so pose/lib/dynconv/cuda.py imports (never called);
  2. torch.zeros/torch.ones with device='cuda' create CPU tensors while the model is built
     (ExpandMask.__init__ makes its dilation kernels on 'cuda');
  3. dynconv.maskunit.make_active_positions_list{,_inverted} return None (bookkeeping for the
     cupy gather/scatter kernels only; the inverted list is allocated on 'cuda');
  4. every InvertedResidual has training=True while all other modules are in eval mode, so it
     takes the authors' own masked-dense branch `out = x + apply_mask(conv(x), mask)` instead of
     the cupy gather/scatter branch (`fast_inference = not self.training`). BatchNorm and Gumbel
     are eval-mode modules of their own, so running statistics and the hard threshold are used.
The mask arithmetic (mask conv, threshold, dilation by conv_transpose/conv + `> 0.5`,
multiplication) is the authors' code in every model.

Calibration: BatchNorm running statistics from the calibration frames in graph order; each mask
unit, in order with the earlier masks active, fitted by ridge regression to the frames' saliency
at its resolution (its 3x3 conv for ResNet, 1x1 conv for the hourglass; the ResNet Squeeze's
global fc gets small random weights), then its conv bias set so the hard mask's density over
the calibration frames is --density (0.3).
"""
import argparse
import contextlib
import os
import sys
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calib  # noqa: E402
from calib import common  # noqa: E402

SEED = 20240603
OUT = calib.HERE


def purge(prefixes):
    for k in list(sys.modules):
        if k.split(".")[0] in prefixes:
            del sys.modules[k]


def init_weights(model, seed, last_bns):
    """He convs (as the authors' init), BN affines near identity, residual-branch last BN
    gammas 0.2-0.5 (as in trained ResNets), classifier / head small random."""
    import torch
    import torch.nn as nn
    g = torch.Generator().manual_seed(seed)
    for mod in model.modules():
        if common.init_conv_bn(mod, g):
            continue
        if isinstance(mod, nn.Linear):
            mod.weight.data = torch.randn(mod.weight.shape, generator=g) / np.sqrt(mod.in_features)
            mod.bias.data = torch.randn(mod.out_features, generator=g) * 0.01
    for bn in last_bns:
        bn.weight.data = torch.empty(bn.num_features).uniform_(0.2, 0.5, generator=g)
    return g


def set_dense(conv):
    """Mask unit logit >= 0 everywhere: the block runs dense until its unit is fitted."""
    conv.weight.data.zero_()
    conv.bias.data.fill_(1.0)


def fit_mask_conv(conv, feats, sal, density, fc=None, g=None, lam=0.1, max_rows=None):
    """Fit a mask unit's conv (k x k, stride s, 1 output) by ridge regression from its input
    features to the saliency targets at its output resolution; logit scaled to unit std; with the
    Squeeze fc, its per-image term (std 0.2 of the logit) is added before the bias is set to the
    (1 - density) quantile. max_rows: fit on that many positions drawn at random (seeded), for
    wide layers whose full system would be too large; the threshold still uses every position.
    Returns (R^2, threshold)."""
    import torch
    import torch.nn.functional as F
    k, s, p = conv.kernel_size[0], conv.stride[0], conv.padding[0]
    n, c = feats.shape[:2]
    cols = F.unfold(feats.double(), k, padding=p, stride=s)            # n, c*k*k, L
    ho = (feats.shape[2] + 2 * p - k) // s + 1
    wo = (feats.shape[3] + 2 * p - k) // s + 1
    X = cols.permute(0, 2, 1).reshape(-1, c * k * k)
    y = calib.target_map(sal, ho, wo).reshape(-1)
    if max_rows is not None and len(X) > max_rows:
        rows = torch.randperm(len(X), generator=torch.Generator().manual_seed(SEED))[:max_rows]
        w, b0, _, r2 = calib.ridge(X[rows], y[rows.numpy()], lam)
        pred = X.double() @ w + b0
    else:
        w, b0, pred, r2 = calib.ridge(X, y, lam)
    scale = 1.0 / float(pred.std())
    logit = (pred * scale).reshape(n, ho * wo)
    conv.weight.data = (w * scale).float().view(1, c, k, k)
    if fc is not None:
        pooled = feats.double().mean((2, 3))
        fw = torch.randn(1, c, generator=g, dtype=torch.float64)
        term = pooled @ fw.T
        fw = fw * 0.2 / float(term.std() + 1e-9)
        fc.weight.data = fw.float()
        fc.bias.data.zero_()
        logit = logit + (pooled @ fw.T) - float((pooled @ fw.T).mean())
        b0 = b0 - float((pooled @ fw.T).mean() / scale)
    thr = float(np.quantile(logit.numpy(), 1.0 - density))
    conv.bias.data = torch.tensor([float(b0 * scale) - thr], dtype=torch.float32)
    return r2, thr


# ------------------------------------------------------------------------------------------------
# Classification ResNets
# ------------------------------------------------------------------------------------------------
class ResNetExport:
    """Wraps the authors' ResNet: supplies meta and returns the logits only."""

    @staticmethod
    def make(net):
        import torch.nn as nn

        class Wrap(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = net

            def forward(self, x):
                meta = {"masks": [], "gumbel_temp": 1.0, "gumbel_noise": False, "epoch": 0,
                        "save_masks": True}
                logits, meta = self.net(x, meta)
                return logits

        return Wrap().eval()


def resnet(repo, arch, width=0.25):
    """The authors' ResNet, uncalibrated (random weights), and its export wrapper."""
    import torch
    purge({"dynconv", "models", "utils"})
    sys.path.insert(0, os.path.join(repo, "classification"))
    try:
        with contextlib.redirect_stdout(open(os.devnull, "w")):
            from models import resnet_224x224 as R
            torch.manual_seed(SEED)
            net = getattr(R, arch)(sparse=True, width_mult=width).eval()
    finally:
        sys.path.remove(os.path.join(repo, "classification"))
    return net, ResNetExport.make(net)


def calibrated_resnet(repo, arch, density, width=0.25, max_rows=None):
    """The authors' ResNet with calibrated weights (module docstring). Width 1.0 calibrates on
    32 frames (24 vtest + 8 photos) with mask-unit fits on 4096 positions (max_rows), which keeps
    its widest fits (18432 inputs) to about a minute on two cores.
    Returns (wrap, net, calibration batch, origin)."""
    import torch
    net, wrap = resnet(repo, arch, width)
    blocks = [b for layer in (net.layer1, net.layer2, net.layer3, net.layer4) for b in layer]
    last_bns = [getattr(b, "bn3", None) or b.bn2 for b in blocks]
    g = init_weights(net, SEED + (0 if arch == "resnet50" else 1), last_bns)
    for b in blocks:
        set_dense(b.masker.maskconv.conv)
        b.masker.maskconv.fc.weight.data.zero_()
        b.masker.maskconv.fc.bias.data.zero_()
    h = w = 224
    imgs, _ = calib.calibration_set(h, w) if max_rows is None else calib.calibration_set(h, w, 24, 8)
    x = torch.from_numpy(common.to_input(imgs, common.IMAGENET_MEAN, common.IMAGENET_STD))
    sal = [common.saliency(im) for im in imgs]
    for i, b in enumerate(blocks):
        feats = calib.capture_input(net, b.masker, wrap, x)
        r2, thr = fit_mask_conv(b.masker.maskconv.conv, feats, sal, density, b.masker.maskconv.fc, g,
                                max_rows=max_rows)
        print(f"  mask unit {i}: {feats.shape[1]} ch -> stride {b.masker.maskconv.conv.stride[0]}, "
              f"ridge R^2 {r2:.2f}, threshold {thr:+.3f}", flush=True)
    calib.full_bn_pass(net, wrap, x)
    calibrate_head(net.fc, wrap, x)
    origin = {"repo": "thomasverelst/dynconv", "commit": calib.repo_commit(repo),
              "file": "classification/models/resnet_224x224.py",
              "class": f"{arch}(sparse=True, width_mult={width}) -> ResNet"
                       f"({'Bottleneck' if arch == 'resnet50' else 'BasicBlock'})",
              "license": "MIT (classification/LICENSE, Copyright (c) 2020 Verelst Thomas)"}
    return wrap, net, x, origin


def build_resnet(repo, arch, density, name):
    wrap, net, x, origin = calibrated_resnet(repo, arch, density)
    return finish(name, wrap, x, 224, 224, density, origin, net)


def calibrate_head(fc, run, x, target_std=2.0):
    import torch
    feats = []
    hk = fc.register_forward_pre_hook(lambda m, i: feats.append(i[0].detach().double()))
    with torch.no_grad():
        run(x)
    hk.remove()
    f = torch.cat(feats)
    w = fc.weight.data.double()
    s = target_std / float(((f - f.mean(0)) @ w.T).std())
    fc.weight.data = (w * s).float()
    fc.bias.data = (-(w * s) @ f.mean(0) + fc.bias.data.double()).float()


# ------------------------------------------------------------------------------------------------
# Pose hourglass
# ------------------------------------------------------------------------------------------------
class Cfg(dict):
    """The yaml config as attributes (the pose code reads cfg.MODEL.EXTRA.NUM_FEATURES etc.)."""

    def __getattr__(self, k):
        v = self[k]
        return Cfg(v) if isinstance(v, dict) else v


@contextlib.contextmanager
def cuda_to_cpu_factories():
    """Shim 2: torch.zeros / torch.ones with device='cuda' make CPU tensors."""
    import torch
    orig = {f: getattr(torch, f) for f in ("zeros", "ones")}

    def wrap(fn):
        def inner(*a, **k):
            if str(k.get("device", "")).startswith("cuda"):
                k["device"] = "cpu"
            return fn(*a, **k)
        return inner
    for f, fn in orig.items():
        setattr(torch, f, wrap(fn))
    try:
        yield
    finally:
        for f, fn in orig.items():
            setattr(torch, f, fn)


def build_hourglass(repo, density, name, features=48, size=128):
    import torch
    import torch.nn as nn
    import yaml
    purge({"dynconv", "models", "utils", "_init_paths", "cupy"})
    # Shim 1: cupy stub (pose/lib/dynconv/cuda.py decorates with cupy.util.memoize at import)
    cupy = types.ModuleType("cupy")
    cupy.util = types.SimpleNamespace(memoize=lambda **kw: (lambda f: f))
    sys.modules["cupy"] = cupy
    sys.path[:0] = [os.path.join(repo, "pose", "lib"), os.path.join(repo, "pose", "tools")]
    yml = os.path.join(repo, "pose", "experiments", "4stack", "s025.yaml")
    cfg = yaml.safe_load(open(yml))
    cfg["MODEL"]["EXTRA"]["NUM_FEATURES"] = features
    cfg = Cfg(cfg)
    with contextlib.redirect_stdout(open(os.devnull, "w")):
        import dynconv
        import dynconv.maskunit as mu
        from models import hourglass_mn as H
        torch.manual_seed(SEED)
        with cuda_to_cpu_factories():
            net = H.get_pose_net(cfg, is_train=False).eval()
    sys.path[:2] = []
    # Shim 3: no active-position bookkeeping (cupy kernels only)
    mu.make_active_positions_list = lambda m: None
    mu.make_active_positions_list_inverted = lambda m, l: None
    sparse = [m for m in net.modules() if isinstance(m, H.InvertedResidual) and m.sparse]
    for m in net.modules():  # Shim 4: the authors' masked-dense branch
        if isinstance(m, H.InvertedResidual):
            m.training = True
    g = init_weights(net, SEED + 2, [b.conv[7] for b in sparse])
    for b in sparse:
        set_dense(b.masker.maskconv)

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, x):
            meta = {"masks": [], "gumbel_temp": 1.0, "gumbel_noise": False, "save_masks": True}
            out, meta = self.net(x, meta)
            return tuple(out)

    wrap = Wrap()
    wrap.training = False
    imgs, _ = calib.calibration_set(size, size, n_vtest=24, n_photos=8)
    x = torch.from_numpy(common.to_input(imgs, common.IMAGENET_MEAN, common.IMAGENET_STD))
    sal = [common.saliency(im) for im in imgs]
    for i, b in enumerate(sparse):
        feats = calib.capture_input(net, b.masker, wrap, x)
        r2, thr = fit_mask_conv(b.masker.maskconv, feats, sal, density)
        if i % 8 == 0 or i == len(sparse) - 1:
            print(f"  mask unit {i}/{len(sparse)}: {feats.shape[1]} ch {feats.shape[2]}x{feats.shape[3]}, "
                  f"ridge R^2 {r2:.2f}, threshold {thr:+.3f}")
    calib.full_bn_pass(net, wrap, x)
    return finish(name, wrap, x, size, size, density,
                  {"repo": "thomasverelst/dynconv", "commit": calib.repo_commit(repo),
                   "file": "pose/lib/models/hourglass_mn.py",
                   "class": "get_pose_net -> HourglassNet(InvertedResidual), config pose/experiments/4stack/"
                            f"s025.yaml with MODEL.EXTRA.NUM_FEATURES {features}",
                   "license": "MIT (pose/LICENSE: Copyright (c) 2019 Feng Zhang, Xiatian Zhu, Hong Hu, "
                              "Mao Ye; Copyright (c) 2020 Verelst Thomas)",
                   "shims": "cupy stub; device='cuda' factories -> CPU at construction; "
                            "make_active_positions_list{,_inverted} -> None; InvertedResidual.training=True "
                            "(masked-dense branch)"},
                  net, out_names=[f"heatmap_{i}" for i in range(cfg.MODEL.EXTRA.NUM_STACKS)],
                  preserve_modes=True)  # shim 4 must survive the export


# ------------------------------------------------------------------------------------------------
def finish(name, wrap, x, h, w, density, origin, net, out_names=("logits",), preserve_modes=False):
    """Export, ORT vs PyTorch check (outputs and every in-graph mask), mask density, goldens."""
    import torch
    path = os.path.join(OUT, f"{name}.onnx")
    n_params = sum(p.numel() for p in net.parameters())
    props = {"dynaspa.mean": ",".join(map(str, common.IMAGENET_MEAN)),
             "dynaspa.std": ",".join(map(str, common.IMAGENET_STD)),
             "dynaspa.source": f"models/authors/dynconv_authors.py: {origin['repo']}@{origin['commit'][:12]} "
                               f"{origin['file']} {origin['class']}",
             "dynaspa.license": origin["license"]}
    m = calib.export(wrap, (x[:1],), path, ["input"], list(out_names), props,
                     f"DynConv {name} (authors' code, random calibrated weights, fixed seed)",
                     preserve_modes=preserve_modes)
    mv = calib.mask_values(m)
    # PyTorch reference masks: the Gumbel outputs in forward order
    rec = []
    hooks = [mod.register_forward_hook(lambda mod, i, o: rec.append(o.detach().numpy()))
             for mod in net.modules() if type(mod).__name__ == "Gumbel"]
    with torch.no_grad():
        ref = [wrap(x[j:j + 1]) for j in range(len(x))]
    for hk in hooks:
        hk.remove()
    ref = [(r,) if isinstance(r, torch.Tensor) else r for r in ref]
    n_masks = len([t for t in mv if t[1] == 0.0])
    worst, worst_all, flips, cells, dens, flipped_frames = 0.0, 0.0, 0, 0, [], 0
    for j in range(len(x)):
        res = calib.ort_run(path, {"input": x[j:j + 1].numpy()}, out_names, [t[3] for t in mv])
        gm = [r for r, t in zip(res[len(out_names):], mv) if t[1] == 0.0]  # the Gumbel thresholds
        tm = rec[j * n_masks:(j + 1) * n_masks]
        f = sum(int((a.astype(np.float32) != b.astype(np.float32)).sum()) for a, b in zip(gm, tm))
        cells += sum(a.size for a in gm)
        flips += f
        flipped_frames += f > 0
        err = max(common.rel_l2(a, b.numpy()) for a, b in zip(res[:len(out_names)], ref[j]))
        worst_all = max(worst_all, err)
        if f == 0:
            worst = max(worst, err)
        dens.append(float(np.mean([a.mean() for a in gm])))
    # The thresholds were set at quantiles of exactly these frames' logits, so a few logits lie
    # within float rounding of 0 and flip between PyTorch and ONNX Runtime; a flip changes
    # everything downstream. The rel L2 is reported over the frames without a flip.
    print(f"{name}: ORT vs authors' PyTorch forward on {len(x)} calibration frames: masks identical on "
          f"{len(x) - flipped_frames}, worst rel L2 there {worst:.1e}; {flipped_frames} frames with "
          f"{flips} of {cells} mask positions flipped (rel L2 up to {worst_all:.1e}); "
          f"mean hard-mask density {np.mean(dens):.3f}")
    checks = {"origin": origin, "ort_vs_pytorch_rel_l2_no_flip_frames": worst,
              "ort_vs_pytorch_frames_with_flips": int(flipped_frames),
              "ort_vs_pytorch_mask_flips": flips, "ort_vs_pytorch_rel_l2_all_frames": worst_all,
              "masks": n_masks, "mask_cells_checked": cells, "calibration_frames": len(x)}
    calib.report(name, path, m, n_params, [1, 3, h, w], float(np.mean(dens)), checks)

    write_goldens(name, h, w, out_names)
    return path


def write_goldens(name, h, w, out_names):
    def feeds(img):
        return {"input": common.to_input([common.load_rgb(img, w, h)], common.IMAGENET_MEAN,
                                         common.IMAGENET_STD)}
    calib.write_goldens(name, os.path.join(OUT, f"{name}.onnx"), f"<image> -> PIL bilinear resize to "
                        f"{w}x{h} -> /255 -> (x-mean)/std (ImageNet) -> NCHW float32", feeds, list(out_names),
                        note="masks: Cast(GreaterOrEqual(logit, 0)) of each Gumbel (hard masks) and, where the "
                             "graph keeps them, the dilated masks Greater(conv(...), 0.5)")


GOLDEN_SHAPES = {"dynconv_resnet50_w025": (224, 224, ["logits"]), "dynconv_resnet18_w025": (224, 224, ["logits"]),
                 "dynconv_hourglass_f48": (128, 128, [f"heatmap_{i}" for i in range(4)])}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True, help="checkout of github.com/thomasverelst/dynconv")
    ap.add_argument("--density", type=float, default=0.3)
    ap.add_argument("--only", nargs="+", default=["resnet50", "resnet18", "hourglass"])
    ap.add_argument("--goldens-only", action="store_true", help="only rewrite the goldens of the committed files")
    args = ap.parse_args()
    if args.goldens_only:
        for key in args.only:
            name = [n for n in GOLDEN_SHAPES if key.replace("resnet", "resnet") in n][0]
            write_goldens(name, *GOLDEN_SHAPES[name])
        return 0
    import torch
    torch.set_num_threads(os.cpu_count() or 1)
    if "resnet50" in args.only:
        build_resnet(args.repo, "resnet50", args.density, "dynconv_resnet50_w025")
    if "resnet18" in args.only:
        build_resnet(args.repo, "resnet18", args.density, "dynconv_resnet18_w025")
    if "hourglass" in args.only:
        build_hourglass(args.repo, args.density, "dynconv_hourglass_f48")
    return 0


if __name__ == "__main__":
    sys.exit(main())
