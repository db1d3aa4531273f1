#!/usr/bin/env python3
"""DynConv (Verelst & Tuytelaars, CVPR 2020) ResNets as plain ONNX, with their mask datasets.

    python3 models/dynconv.py [--density 0.3] [--sizes small full] [--out models] [--no-dataset]

writes, for density d (file suffix dNN = round(100 d)):
  models/dynconv_small_dNN.onnx   reduced: 96x72 input, stem + 3 stages x 2 bottlenecks
                                  (widths 16/32/64, 10 classes), 4 sparse blocks (committed)
  models/dynconv_full_dNN.onnx    ResNet-50 layout at 224x224 ([3,4,6,3], widths 64..512,
                                  1000 classes), 13 sparse blocks (NOT committed: ~100 MB)
  models/masks/dynconv_<size>_dNN.dsm   the mask of every sparse conv on the 200 vtest frames
  models/masks/dynconv_<size>_dNN.json  per-layer statistics (density, spread, components)

Architecture (torchvision ResNet v1.5 bottlenecks; DynConv's spatial execution):
  every stride-1 bottleneck is sparse. Its mask unit is a 1x1 conv (bias) on the block input ->
  logit; mask = Cast(Greater(logit, 0)) (the hard threshold DynConv uses at inference). The
  residual branch is multiplied by the mask: conv1 (1x1) -> BN -> ReLU -> Mul(mask dilated by
  MaxPool 3x3/s1/p1, the halo of conv2), conv2 (3x3) -> BN -> ReLU -> Mul(mask),
  conv3 (1x1) -> BN -> Mul(mask); out = ReLU(identity + branch). The stride-2 first block of a
  stage stays dense (its mask would live at two resolutions). Masks (float 0/1, [B,1,H,W]) are
  extra graph outputs `mask_<layer>_<block>` (and `..._dil` for the dilated one).

Weights (no pretrained weights exist here): fixed seed, He-initialised convs; BatchNorm running
statistics measured on real frames (calibration set: 48 vtest frames + 10 still photos), in graph
order so each BN sees the calibrated network upstream; residual-branch last-BN gammas small as in
trained ResNets. Mask units are fitted, block by block with the earlier masks active, by ridge
regression from the block input features to a centre-surround saliency map of the frame
(common.saliency, area-averaged to the block's resolution, smoothed over ~1 cell), so they respond
to image content; the logit is scaled to unit standard deviation and its bias set so that the
mean mask density over the calibration frames is d. The classifier is rescaled so the logits have
a standard deviation of ~2 with the bias centred on the mean calibration feature.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

SEED = 20241107
CONFIGS = {
    "small": dict(h=72, w=96, stem="3x3", stem_ch=16, layers=[2, 2, 2], widths=[16, 32, 64],
                  classes=10),
    "full": dict(h=224, w=224, stem="7x7", stem_ch=64, layers=[3, 4, 6, 3],
                 widths=[64, 128, 256, 512], classes=1000),
}


class StopForward(Exception):
    """Raised by a recording block: the rest of the network is not needed."""


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride, sparse):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))
        self.sparse = sparse
        if sparse:
            self.mask_unit = nn.Conv2d(cin, 1, 1, bias=True)  # DynConv mask unit
        self.use_masks = True      # False: dense (BN calibration)
        self.record = None         # list: collects block inputs (mask-unit fitting)

    def forward(self, x, masks):
        if self.record is not None:
            self.record.append(x.detach())
            raise StopForward
        identity = x if self.downsample is None else self.downsample(x)
        if self.sparse and self.use_masks:
            logit = self.mask_unit(x)
            m = (logit > 0).float()
            m_dil = F.max_pool2d(m, 3, 1, 1)
            masks.append(m)
            masks.append(m_dil)
        y = F.relu(self.bn1(self.conv1(x)))
        if self.sparse and self.use_masks:
            y = y * m_dil
        y = F.relu(self.bn2(self.conv2(y)))
        if self.sparse and self.use_masks:
            y = y * m
        y = self.bn3(self.conv3(y))
        if self.sparse and self.use_masks:
            y = y * m
        return F.relu(y + identity)


class DynConvResNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = cfg["stem_ch"]
        if cfg["stem"] == "7x7":
            self.conv1 = nn.Conv2d(3, c, 7, 2, 3, bias=False)
        else:
            self.conv1 = nn.Conv2d(3, c, 3, 2, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = c
        self.stages = []
        for li, (n, w) in enumerate(zip(cfg["layers"], cfg["widths"]), start=1):
            blocks = []
            for bi in range(n):
                stride = 2 if (bi == 0 and li > 1) else 1
                blocks.append(Bottleneck(cin, w, stride, sparse=(stride == 1)))
                cin = w * Bottleneck.expansion
            setattr(self, f"layer{li}", nn.ModuleList(blocks))
            self.stages.append(f"layer{li}")
        self.fc = nn.Linear(cin, cfg["classes"])

    def blocks(self):
        for name in self.stages:
            for bi, b in enumerate(getattr(self, name)):
                yield name, bi, b

    def sparse_blocks(self):
        return [(n, i, b) for n, i, b in self.blocks() if b.sparse]

    def forward(self, x):
        masks = []
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        for name in self.stages:
            for b in getattr(self, name):
                x = b(x, masks)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return (self.fc(x), *masks)


def init_weights(model, seed):
    g = torch.Generator().manual_seed(seed)
    for mod in model.modules():
        common.init_conv_bn(mod, g)
    for _, _, b in model.blocks():  # residual-branch last BN: small gammas (trained ResNets)
        b.bn3.weight.data = torch.empty(b.bn3.num_features).uniform_(0.2, 0.5, generator=g)
    model.fc.weight.data = torch.randn(model.fc.weight.shape, generator=g) / np.sqrt(model.fc.in_features)
    model.fc.bias.data = torch.randn(model.fc.out_features, generator=g) * 0.01


@torch.no_grad()
def calibrate_bn(model, x):
    """One forward pass in eval mode; each BN's running stats are set from its input batch just
    before it runs (so downstream BNs see the calibrated network upstream)."""
    hooks = []

    def pre(mod, inp):
        a = inp[0].double()
        mod.running_mean.copy_(a.mean((0, 2, 3)).float())
        mod.running_var.copy_(a.var((0, 2, 3), unbiased=False).float() + 1e-3)

    for mod in model.modules():
        if isinstance(mod, nn.BatchNorm2d):
            hooks.append(mod.register_forward_pre_hook(pre))
    run_batched(model, x)
    for h in hooks:
        h.remove()


def run_batched(model, x, bs=16):
    outs = []
    with torch.no_grad():
        for i in range(0, len(x), bs):
            o = model(torch.from_numpy(x[i:i + bs]))
            outs.append([t.numpy() for t in o])
    return [np.concatenate([o[k] for o in outs]) for k in range(len(outs[0]))]


@torch.no_grad()
def fit_mask_units(model, x, sal, density, lam=1e-2):
    """Fit each sparse block's mask unit (in order, earlier masks active) to the saliency maps
    `sal` (list of HxW float maps at image resolution); set the bias for the target density."""
    for name, bi, blk in model.sparse_blocks():
        blk.record = []
        for i in range(0, len(x), 16):
            try:
                model(torch.from_numpy(x[i:i + 16]))
            except StopForward:
                pass
        feats = torch.cat(blk.record).double()
        blk.record = None
        n, c, h, w = feats.shape
        t = np.stack([common.area_resize(s, h, w) for s in sal])
        from scipy.ndimage import gaussian_filter
        t = np.stack([gaussian_filter(m, 0.7) for m in t])
        t = (t - t.mean()) / (t.std() + 1e-9)
        X = feats.permute(0, 2, 3, 1).reshape(-1, c)
        mu, sd = X.mean(0), X.std(0) + 1e-6
        Xs = (X - mu) / sd
        y = torch.from_numpy(t.reshape(-1)).double()
        A = Xs.T @ Xs / len(Xs) + lam * torch.eye(c, dtype=torch.float64)
        beta = torch.linalg.solve(A, Xs.T @ y / len(Xs))
        pred = Xs @ beta
        r2 = 1 - float(((pred - y) ** 2).mean() / (y ** 2).mean())
        wgt = beta / sd
        b0 = -(mu / sd) @ beta
        scale = 1.0 / float(pred.std())
        logit = (pred * scale).numpy()
        thr = float(np.quantile(logit, 1.0 - density))
        blk.mask_unit.weight.data = (wgt * scale).float().view(1, c, 1, 1)
        blk.mask_unit.bias.data = torch.tensor([float(b0 * scale) - thr], dtype=torch.float32)
        blk.use_masks = True  # the blocks after this one are still dense
        print(f"  mask unit {name}.{bi}: {c} ch, {h}x{w}, ridge R^2 {r2:.2f}, threshold {thr:+.3f}")


@torch.no_grad()
def calibrate_head(model, x, target_std=2.0):
    feats = []
    hk = model.fc.register_forward_pre_hook(lambda m, i: feats.append(i[0].detach().double()))
    run_batched(model, x)
    hk.remove()
    f = torch.cat(feats)
    w = model.fc.weight.data.double()
    logits = (f - f.mean(0)) @ w.T
    s = target_std / float(logits.std())
    model.fc.weight.data = (w * s).float()
    model.fc.bias.data = (-(w * s) @ f.mean(0) + model.fc.bias.data.double()).float()


def calibration_set(h, w):
    vt = common.vtest_paths()
    idx = np.linspace(0, len(vt) - 1, 48).round().astype(int)
    paths = [vt[i] for i in idx] + common.photo_paths()[:10]
    imgs = [common.load_rgb(p, w, h) for p in paths]
    return imgs, paths


def calibrated(size, density):
    """The model with calibrated weights (module docstring) and its calibration batch."""
    cfg = CONFIGS[size]
    torch.manual_seed(SEED)
    model = DynConvResNet(cfg).eval()
    init_weights(model, SEED + (0 if size == "small" else 1))
    imgs, _ = calibration_set(cfg["h"], cfg["w"])
    x = common.to_input(imgs, common.IMAGENET_MEAN, common.IMAGENET_STD)
    sal = [common.saliency(im) for im in imgs]
    for _, _, b in model.blocks():
        b.use_masks = False
    calibrate_bn(model, x)
    fit_mask_units(model, x, sal, density)
    calibrate_head(model, x)
    return model, x


def build(size, density, out_dir, dataset=True):
    cfg = CONFIGS[size]
    h, w = cfg["h"], cfg["w"]
    model, x = calibrated(size, density)
    tag = f"dynconv_{size}_d{round(density * 100):02d}"
    path = os.path.join(out_dir, f"{tag}.onnx")
    sparse = model.sparse_blocks()
    mask_names = []
    for name, bi, _ in sparse:
        mask_names += [f"mask_{name}_{bi}", f"mask_{name}_{bi}_dil"]
    props = {"dynaspa.mean": ",".join(map(str, common.IMAGENET_MEAN)),
             "dynaspa.std": ",".join(map(str, common.IMAGENET_STD)),
             "dynaspa.model": tag, "dynaspa.family": "dynconv", "dynaspa.density": density,
             "dynaspa.masks": ",".join(mask_names),
             "dynaspa.source": "models/dynconv.py (synthetic weights, fixed seed, calibrated on "
                               "models/frames)"}
    doc = (f"DynConv ResNet ({size}): bottlenecks {cfg['layers']} widths {cfg['widths']}, "
           f"{h}x{w}, {len(sparse)} sparse blocks, mask = Greater(1x1 conv logit, 0), target density "
           f"{density}; synthetic weights")
    dummy = torch.from_numpy(x[:1])
    m = common.export(model, (dummy,), path, ["input"], ["logits"] + mask_names, props, doc)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{tag}: {n_params:,} params, {len(m.graph.node)} nodes, "
          f"{os.path.getsize(path) / 1e6:.2f} MB -> {path}")
    print(f"  ops: {' '.join(common.op_set(path))}")
    # ORT vs PyTorch on the calibration frames (dense function incl. masks)
    sess = common.ort_session(path)
    outs = sess.run(None, {"input": x[:8]})
    ref = run_batched(model, x[:8])
    flips = sum(int((a != b).sum()) for a, b in zip(outs[1:], ref[1:]))
    opt = common.ort_session(path, optimize=True).run(None, {"input": x[:8]})
    rel_opt = common.rel_l2(opt[0], outs[0])
    if not np.all(np.isfinite(outs[0])) or rel_opt > 1e-5:
        raise RuntimeError(f"{tag}: ORT optimised vs unoptimised rel L2 {rel_opt:.1e}")
    print(f"  ORT vs torch: logits rel L2 {common.rel_l2(outs[0], ref[0]):.1e}, mask flips {flips}; "
          f"ORT opt vs no-opt {rel_opt:.1e}; logits std {outs[0].std():.2f}")
    # sparse ops -> which mask they see
    nodes = {n.name for n in m.graph.node}
    ops = []
    maps = []
    for k, (name, bi, _) in enumerate(sparse):
        maps.append(f"mask_{name}_{bi}")
        for conv, dil in (("conv1", 3), ("conv2", 1), ("conv3", 1)):
            node = f"/{name}.{bi}/{conv}/Conv"
            if node not in nodes:
                node = f"/{name}/{name}.{bi}/{conv}/Conv"
            assert node in nodes, (node, sorted(nodes)[:20])
            ops.append((node, k, 1, dil))
    if dataset:
        write_dataset(path, tag, size, density, maps, ops, out_dir)
    return path


def write_dataset(path, tag, size, density, map_names, ops, out_dir):
    cfg = CONFIGS[size]
    h, w = cfg["h"], cfg["w"]
    sess = common.ort_session(path)
    frames = []
    per_map = {n: [] for n in map_names}
    paths = common.vtest_paths()
    for i in range(0, len(paths), 8):
        xb = common.to_input([common.load_rgb(p, w, h) for p in paths[i:i + 8]],
                             common.IMAGENET_MEAN, common.IMAGENET_STD)
        res = sess.run(map_names, {"input": xb})
        for j in range(len(xb)):
            frames.append([res[k][j, 0] > 0.5 for k in range(len(map_names))])
            for k, n in enumerate(map_names):
                per_map[n].append(res[k][j, 0] > 0.5)
    maps = [(n, per_map[n][0].shape[0], per_map[n][0].shape[1], 0) for n in map_names]
    meta = {"model": f"models/{tag}.onnx", "family": "dynconv", "density_target": density,
            "frames": [os.path.relpath(p, common.ROOT) for p in paths],
            "source": "vtest.avi frames 0,3,...,597 (models/frames/vtest), ONNX Runtime, "
                      "graph optimisations disabled",
            "producer": "models/dynconv.py"}
    dsm = os.path.join(out_dir, "masks", f"{tag}.dsm")
    nbytes = common.write_mask_dataset(dsm, meta, maps, ops, frames)
    stats = []
    for n in map_names:
        stats.append((n, common.mask_stats(per_map[n])))
    for op, mi, red, dil in ops:
        if dil > 1:
            s = common.mask_stats([common.op_mask(m, red, dil) for m in per_map[map_names[mi]]])
            stats.append((map_names[mi] + "_dil", s))
    mean_d = float(np.mean([s["density"] for n, s in stats if not n.endswith("_dil")]))
    with open(os.path.join(out_dir, "masks", f"{tag}.json"), "w") as f:
        json.dump({"model": tag, "frames": len(frames), "mean_density": mean_d,
                   "layers": {n: s for n, s in stats}}, f, indent=1)
        f.write("\n")
    print(f"  mask dataset {dsm}: {len(frames)} frames, {len(maps)} maps, {len(ops)} ops, "
          f"{nbytes / 1e3:.1f} kB, mean density over vtest {mean_d:.3f}")
    print(common.stats_table(stats, tag))


def main():
    return common.family_main(__doc__, CONFIGS, build)

if __name__ == "__main__":
    sys.exit(main())
