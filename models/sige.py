#!/usr/bin/env python3
"""SIGE (Li et al., NeurIPS 2022) conditional image generator as plain ONNX, with its edits and
mask datasets.

    python3 models/sige.py [--density 0.3] [--sizes small full] [--out models] [--no-dataset]

writes
  models/sige_small.onnx     reduced: 64x48 input, ngf 16, 2 residual blocks (committed)
  models/sige_full.onnx      pix2pix/CycleGAN "resnet_9blocks" generator at 224x168 (the frames' size), ngf 64,
                             9 residual blocks (NOT committed: ~45 MB)
  models/masks/sige_<size>_dNN.dsm / .json   the mask every sparse conv sees for 200 edits of the
                             vtest frames, edit sizes scaled so the mean density is d (dNN =
                             round(100 d)); the model itself does not depend on d.

Graph: inputs `input` (the edited image, RGB scaled to [-1, 1], NCHW) and `mask` ([B,1,H,W]
float 0/1: the thresholded difference between the original and the edited input,
max over channels of |edited - original| > 0.04 in [0,1] pixel units, computed outside the graph
by the caller, e.g. the runtime). Inside the graph the mask is reduced to each resolution r of
the generator (MaxPool kernel = stride = 2^r: a cell is active if any pixel in it changed) and
dilated by one 3x3 halo (MaxPool 3x3 / stride 1 / pad 1): mask_r0, mask_r1, mask_r2, also graph
outputs. Every conv and transposed conv multiplies its output by the mask of its output
resolution, before normalisation:
  c7s1-ngf:  Conv7x7 -> Mul(mask_r0) -> InstanceNorm -> ReLU
  d2ngf:     Conv3x3/s2 -> Mul(mask_r1) -> InstanceNorm -> ReLU
  d4ngf:     Conv3x3/s2 -> Mul(mask_r2) -> InstanceNorm -> ReLU
  R4ngf x n: x + GN(Mul(Conv3x3(ReLU(GN(Mul(Conv3x3(x), mask_r2)))), mask_r2))   (GroupNorm)
  u2ngf:     ConvTranspose3x3/s2 -> Mul(mask_r1) -> InstanceNorm -> ReLU
  ungf:      ConvTranspose3x3/s2 -> Mul(mask_r0) -> InstanceNorm -> ReLU
  c7s1-3:    Conv7x7 -> Mul(mask_r0) -> Tanh  -> `output`
With mask = all ones the graph is the plain dense generator; with the edit mask ONNX Runtime
computes the zero-fill function (inactive conv outputs are 0), which the runtime's sparse path
must reproduce exactly. SIGE proper keeps the original image's activations where the mask is 0
(the runtime's `Cached` fill); the goldens hold the dense outputs on both images for that.
Zero padding everywhere (no reflection padding); GroupNorm exports as opset-17
Reshape/InstanceNormalization/Reshape/Mul/Add.

Weights: fixed seed, He-initialised convs, norm affines near identity, the last conv scaled so
the dense output on the calibration frames has a pre-Tanh standard deviation of ~0.6 (instance
and group norms have no running statistics to calibrate).
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

SEED = 20241109
MEAN = (0.5, 0.5, 0.5)
STD = (0.5, 0.5, 0.5)
DIFF_THRESHOLD = 0.04
CONFIGS = {
    "small": dict(h=48, w=64, ngf=16, blocks=2, groups=8),
    "full": dict(h=168, w=224, ngf=64, blocks=9, groups=32),
}


class ResBlock(nn.Module):
    def __init__(self, c, groups):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, 1, 1)
        self.norm1 = nn.GroupNorm(groups, c)
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1)
        self.norm2 = nn.GroupNorm(groups, c)

    def forward(self, x, m):
        y = F.relu(self.norm1(self.conv1(x) * m))
        return x + self.norm2(self.conv2(y) * m)


class Generator(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        g = cfg["ngf"]
        self.enc0 = nn.Conv2d(3, g, 7, 1, 3)
        self.enc0_norm = nn.InstanceNorm2d(g, affine=True)
        self.down1 = nn.Conv2d(g, 2 * g, 3, 2, 1)
        self.down1_norm = nn.InstanceNorm2d(2 * g, affine=True)
        self.down2 = nn.Conv2d(2 * g, 4 * g, 3, 2, 1)
        self.down2_norm = nn.InstanceNorm2d(4 * g, affine=True)
        self.blocks = nn.ModuleList([ResBlock(4 * g, cfg["groups"]) for _ in range(cfg["blocks"])])
        self.up1 = nn.ConvTranspose2d(4 * g, 2 * g, 3, 2, 1, output_padding=1)
        self.up1_norm = nn.InstanceNorm2d(2 * g, affine=True)
        self.up2 = nn.ConvTranspose2d(2 * g, g, 3, 2, 1, output_padding=1)
        self.up2_norm = nn.InstanceNorm2d(g, affine=True)
        self.out = nn.Conv2d(g, 3, 7, 1, 3)

    @staticmethod
    def level_masks(mask):
        m0 = F.max_pool2d(mask, 3, 1, 1)
        m1 = F.max_pool2d(F.max_pool2d(mask, 2, 2), 3, 1, 1)
        m2 = F.max_pool2d(F.max_pool2d(mask, 4, 4), 3, 1, 1)
        return m0, m1, m2

    def forward(self, x, mask):
        m0, m1, m2 = self.level_masks(mask)
        x = F.relu(self.enc0_norm(self.enc0(x) * m0))
        x = F.relu(self.down1_norm(self.down1(x) * m1))
        x = F.relu(self.down2_norm(self.down2(x) * m2))
        for b in self.blocks:
            x = b(x, m2)
        x = F.relu(self.up1_norm(self.up1(x) * m1))
        x = F.relu(self.up2_norm(self.up2(x) * m0))
        return torch.tanh(self.out(x) * m0), m0, m1, m2

    def sparse_convs(self):
        """(module path, output level) of every masked conv, in graph order."""
        out = [("enc0", 0), ("down1", 1), ("down2", 2)]
        for i in range(len(self.blocks)):
            out += [(f"blocks.{i}.conv1", 2), (f"blocks.{i}.conv2", 2)]
        return out + [("up1", 1), ("up2", 0), ("out", 0)]


def init_weights(model, seed):
    g = torch.Generator().manual_seed(seed)
    for mod in model.modules():
        if isinstance(mod, (nn.Conv2d, nn.ConvTranspose2d)):
            k = mod.kernel_size[0] * mod.kernel_size[1]
            fan_in = (mod.in_channels if isinstance(mod, nn.Conv2d) else mod.out_channels) * k
            if isinstance(mod, nn.ConvTranspose2d):
                fan_in = mod.in_channels * k / 4.0   # stride 2: each output sees ~1/4 of the taps
            mod.weight.data = torch.randn(mod.weight.shape, generator=g) * np.sqrt(2.0 / fan_in)
            mod.bias.data = torch.randn(mod.bias.shape, generator=g) * 0.02
        elif isinstance(mod, (nn.InstanceNorm2d, nn.GroupNorm)):
            c = mod.num_features if isinstance(mod, nn.InstanceNorm2d) else mod.num_channels
            mod.weight.data = torch.empty(c).uniform_(0.8, 1.2, generator=g)
            mod.bias.data = torch.randn(c, generator=g) * 0.1
    for b in model.blocks:   # residual branches start small, as in trained generators
        b.norm2.weight.data *= 0.4


def preprocess(img):
    return common.to_input([img], MEAN, STD)


def diff_mask(orig, edited):
    """orig, edited: HxWx3 float [0,1] at the model resolution -> bool HxW."""
    return np.abs(edited - orig).max(-1) > DIFF_THRESHOLD


# ----------------------------------------------------------------------------------------------
# Edits for the mask datasets
# ----------------------------------------------------------------------------------------------
def make_edit(i, scale, bg, cutouts, photos):
    """Edit number i of vtest frame i (deterministic): returns (original u8, edited u8, text).
    One to three edits, each one of: paste a person cut out of another frame (scaled 1-2.5x,
    times `scale`), remove a person (filled with the background), recolour an ellipse, paste an
    ellipse of a still photo. Ellipse radii are proportional to `scale`."""
    rng = np.random.default_rng(1000 + i)
    img = common.load_u8(common.vtest_paths()[i])
    H, W = img.shape[:2]
    ed = img.copy()
    what = []
    for _ in range(int(rng.integers(1, 4))):
        kind = rng.choice(["paste_person", "remove_person", "recolour", "paste_photo"],
                          p=[0.3, 0.15, 0.3, 0.25])
        if kind == "paste_person":
            src_i, cut = cutouts[int(rng.integers(len(cutouts)))]
            src = common.load_u8(common.vtest_paths()[src_i])
            s = float(rng.uniform(1.0, 2.5)) * max(scale, 0.3)
            y0, x0, y1, x1 = cut["bbox"]
            ty = int(rng.integers(40, H)) - y1
            tx = int(rng.integers(0, W)) - (x0 + x1) // 2
            ed = common.paste_cutout(ed, src, cut, dy=ty, dx=tx, scale=s)
            what.append(f"paste person f{common.VTEST_FRAMES[src_i]} x{s:.1f}")
        elif kind == "remove_person":
            people = common.person_cutouts(img, bg)
            if not people:
                continue
            cut = people[int(rng.integers(len(people)))]
            ed = common.remove_cutout(ed, bg, cut)
            what.append("remove person")
        elif kind == "recolour":
            ry = float(rng.uniform(0.08, 0.3)) * H * scale
            rx = ry * float(rng.uniform(0.7, 1.6))
            cy, cx = float(rng.uniform(0, H)), float(rng.uniform(0, W))
            m = common.ellipse(H, W, cy, cx, ry, rx)
            a = ed.astype(np.float64) / 255.0
            hh, ss, vv = common._rgb_to_hsv(a)
            rgb = common._hsv_to_rgb((hh + rng.uniform(0.2, 0.8)) % 1.0,
                                     np.clip(ss * rng.uniform(1.0, 2.0) + 0.15, 0, 1),
                                     np.clip(vv * rng.uniform(0.7, 1.3), 0, 1))
            w = common._soft(m, 1.0)[..., None]
            ed = np.clip(np.round((w * rgb + (1 - w) * a) * 255), 0, 255).astype(np.uint8)
            what.append(f"recolour ellipse r{ry:.0f}x{rx:.0f}")
        else:
            p = photos[int(rng.integers(len(photos)))]
            ry = float(rng.uniform(0.08, 0.3)) * H * scale
            rx = ry * float(rng.uniform(0.7, 1.6))
            ry, rx = min(ry, p.shape[0] / 2 - 1), min(rx, p.shape[1] / 2 - 1)
            oy = int(rng.integers(0, max(1, H - int(2 * ry))))
            ox = int(rng.integers(0, max(1, W - int(2 * rx))))
            ed = common.paste_ellipse(ed, p, p.shape[0] / 2, p.shape[1] / 2, ry, rx, oy, ox)
            what.append(f"paste photo ellipse r{ry:.0f}x{rx:.0f}")
    return img, ed, "; ".join(what)


def edit_masks(scale, h, w, bg, cutouts, photos, n=None):
    out = []
    for i in range(n or len(common.VTEST_FRAMES)):
        o, e, what = make_edit(i, scale, bg, cutouts, photos)
        out.append((diff_mask(common.load_rgb(o, w, h), common.load_rgb(e, w, h)), what))
    return out


def mean_op_density(masks, ops):
    return float(np.mean([[common.op_mask(m, red, dil).mean() for _, _, red, dil in ops]
                          for m in masks]))


def edit_sources():
    bg = common.vtest_background()
    cutouts = []
    for i in range(0, len(common.VTEST_FRAMES), 10):
        img = common.load_u8(common.vtest_paths()[i])
        for c in common.person_cutouts(img, bg):
            y0, x0, y1, x1 = c["bbox"]
            if 1.6 <= (y1 - y0) / max(1, x1 - x0) <= 3.5 and c["area"] >= 80:
                cutouts.append((i, c))
    photos = [common.load_u8(p) for p in common.photo_paths()]
    return bg, cutouts, photos


# ----------------------------------------------------------------------------------------------
def calibration_set(h, w, n_vtest, n_photos):
    vt = common.vtest_paths()
    idx = np.linspace(0, len(vt) - 1, n_vtest).round().astype(int)
    paths = [vt[i] for i in idx] + common.photo_paths()[:n_photos]
    return [common.load_rgb(p, w, h) for p in paths]


@torch.no_grad()
def calibrated(size):
    """The generator with calibrated weights (module docstring), its calibration batch and the
    dense output's pre-Tanh outputs before scaling, with the scale applied."""
    cfg = CONFIGS[size]
    h, w = cfg["h"], cfg["w"]
    torch.manual_seed(SEED)
    model = Generator(cfg).eval()
    init_weights(model, SEED + (0 if size == "small" else 1))
    x = common.to_input(calibration_set(h, w, *((24, 8) if size == "small" else (6, 2))), MEAN, STD)
    ones = torch.ones(len(x), 1, h, w)
    pre = []
    hk = model.out.register_forward_hook(lambda m, i, o: pre.append(o))
    for i in range(0, len(x), 8):
        model(torch.from_numpy(x[i:i + 8]), ones[i:i + 8])
    hk.remove()
    s = 0.6 / float(torch.cat(pre).std())
    model.out.weight.data *= s
    model.out.bias.data *= s
    return model, x, pre, s


@torch.no_grad()
def build(size, density, out_dir, dataset=True):
    cfg = CONFIGS[size]
    h, w = cfg["h"], cfg["w"]
    model, x, pre, s = calibrated(size)
    tag = f"sige_{size}"
    path = os.path.join(out_dir, f"{tag}.onnx")
    props = {"dynaspa.mean": ",".join(map(str, MEAN)), "dynaspa.std": ",".join(map(str, STD)),
             "dynaspa.model": tag, "dynaspa.family": "sige",
             "dynaspa.masks": "mask_r0,mask_r1,mask_r2",
             "dynaspa.mask_input": "mask",
             "dynaspa.mask_rule": f"max over channels |edited - original| > {DIFF_THRESHOLD} "
                                  "(pixels in [0,1]) at the input resolution",
             "dynaspa.fill": "cached",
             "dynaspa.source": "models/sige.py (synthetic weights, fixed seed)"}
    doc = (f"SIGE-style conditional generator ({size}): {h}x{w}, ngf {cfg['ngf']}, {cfg['blocks']} "
           "residual blocks (GroupNorm), InstanceNorm encoder/decoder, every conv output multiplied "
           "by the edit mask of its resolution; synthetic weights")
    ex_mask = torch.from_numpy(np.ones((1, 1, h, w), np.float32))
    m = common.export(model, (torch.from_numpy(x[:1]), ex_mask), path, ["input", "mask"],
                      ["output", "mask_r0", "mask_r1", "mask_r2"], props, doc)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{tag}: {n_params:,} params, {len(m.graph.node)} nodes, "
          f"{os.path.getsize(path) / 1e6:.2f} MB -> {path}")
    print(f"  ops: {' '.join(common.op_set(path))}")
    # check with a real edit mask
    pair = json.load(open(os.path.join(common.FRAMES, "edits", "edits.json")))[0]
    o = common.load_rgb(os.path.join(common.ROOT, pair["original"]), w, h)
    e = common.load_rgb(os.path.join(common.ROOT, pair["edited"]), w, h)
    mk = diff_mask(o, e)[None, None].astype(np.float32)
    xe = preprocess(e)
    ref = [t.numpy() for t in model(torch.from_numpy(xe), torch.from_numpy(mk))]
    got = common.ort_session(path).run(None, {"input": xe, "mask": mk})
    opt = common.ort_session(path, optimize=True).run(None, {"input": xe, "mask": mk})
    rel_opt = common.rel_l2(opt[0], got[0])
    if not np.all(np.isfinite(got[0])) or rel_opt > 1e-5:
        raise RuntimeError(f"{tag}: ORT optimised vs unoptimised rel L2 {rel_opt:.1e}")
    print(f"  ORT vs torch (edit mask {mk.mean():.3f}): output rel L2 {common.rel_l2(got[0], ref[0]):.1e}, "
          f"masks equal {all((a == b).all() for a, b in zip(got[1:], ref[1:]))}; ORT opt vs no-opt "
          f"{rel_opt:.1e}; dense output std {float(torch.cat(pre).std() * s):.2f}")
    nodes = {n.name: n.op_type for n in m.graph.node}
    ops = []
    for mod, level in model.sparse_convs():
        parts = mod.split(".")
        cands = [f"/{mod}/Conv", f"/{mod}/ConvTranspose",
                 "/" + ".".join(parts[:2]) + "/" + "/".join(parts[2:]) + "/Conv"]
        node = next((c for c in cands if c in nodes), None)
        assert node is not None, (mod, cands, [n for n in nodes if "Conv" in n][:30])
        ops.append((node, 0, 2 ** level, 3))
    if dataset:
        write_dataset(tag, size, density, ops, out_dir)
    return path


def write_dataset(tag, size, density, ops, out_dir):
    cfg = CONFIGS[size]
    h, w = cfg["h"], cfg["w"]
    bg, cutouts, photos = edit_sources()
    # edit scale for the target density (bisection on 40 edits, then all 200)
    lo, hi = 0.05, 4.0
    for _ in range(12):
        mid = (lo + hi) / 2
        d = mean_op_density([m for m, _ in edit_masks(mid, h, w, bg, cutouts, photos, n=40)], ops)
        lo, hi = (mid, hi) if d < density else (lo, mid)
    scale = (lo + hi) / 2
    res = edit_masks(scale, h, w, bg, cutouts, photos)
    masks = [m for m, _ in res]
    dtag = f"{tag}_d{round(density * 100):02d}"
    meta = {"model": f"models/{tag}.onnx", "family": "sige", "density_target": density,
            "frames": [os.path.relpath(p, common.ROOT) for p in common.vtest_paths()],
            "edit_scale": scale,
            "source": "edit i of vtest frame i made by models/sige.py make_edit(i, edit_scale); "
                      f"stored map: max over channels |edited - original| > {DIFF_THRESHOLD} at "
                      f"{w}x{h}; each op's mask = MaxPool(reduce) then 3x3 dilation, as in the graph",
            "producer": "models/sige.py"}
    dsm = os.path.join(out_dir, "masks", f"{dtag}.dsm")
    nbytes = common.write_mask_dataset(dsm, meta, [("mask", h, w, 0)], ops, [[m] for m in masks])
    stats = [("mask (input, undilated)", common.mask_stats(masks))]
    for lvl in range(3):
        stats.append((f"mask_r{lvl} ({sum(o[2] == 2 ** lvl for o in ops)} convs)",
                      common.mask_stats([common.op_mask(m, 2 ** lvl, 3) for m in masks])))
    mean_d = mean_op_density(masks, ops)
    with open(os.path.join(out_dir, "masks", f"{dtag}.json"), "w") as f:
        json.dump({"model": tag, "frames": len(masks), "mean_density_over_ops": mean_d,
                   "edit_scale": scale, "layers": {n: s for n, s in stats},
                   "edits": [what for _, what in res]}, f, indent=1)
        f.write("\n")
    print(f"  mask dataset {dsm}: {len(masks)} edits, 1 map, {len(ops)} ops, {nbytes / 1e3:.1f} kB, "
          f"edit scale {scale:.3f}, mean density over ops {mean_d:.3f}")
    print(common.stats_table(stats, dtag))


def main():
    return common.family_main(__doc__, CONFIGS, build)

if __name__ == "__main__":
    sys.exit(main())
