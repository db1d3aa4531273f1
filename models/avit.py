#!/usr/bin/env python3
"""A-ViT (Yin et al., CVPR 2022): DeiT with adaptive token halting, as plain ONNX, with its mask
datasets.

    python3 models/avit.py [--density 0.3] [--sizes small full] [--out models] [--no-dataset]

writes, for density d (file suffix dNN = round(100 d)):
  models/avit_small_dNN.onnx   reduced: 96x72 input, patch 8 (12x9 tokens + class token), dim 64,
                               depth 6, 2 heads, MLP ratio 4, 10 classes (committed)
  models/avit_full_dNN.onnx    DeiT-Small 224/16: dim 384, depth 12, 6 heads, 1000 classes
                               (NOT committed: ~88 MB)
  models/masks/avit_<size>_dNN.dsm / .json   token masks of every masked block on the 200 vtest
                               frames and their statistics

Halting (A-ViT's inference rule): after block l (l < depth-1) every token k gets a halting score
h_k = Sigmoid(gamma * x_k[0] + beta_l) (x_k[0]: the first embedding dimension of the token, as in
A-ViT; gamma = 4, beta_l is block l's threshold), the class token's score is forced to 0 (it never
halts). The scores accumulate per token across blocks, c_k = sum_l h_k (Add, one per block); a
token stays active in block l+1 while c_k < 1 - eps (eps = 0.01): mask = Cast(Less(c, 0.99)).
In a masked block a halted token is removed from attention as a query and as a key (its q/k/v rows
are multiplied by 0 and its key column gets -1e4 added to the attention logits before Softmax) and
from the MLP, and its residual stream is left unchanged:
  qkv = (LN1(x) @ Wqkv + b) * m;  attn = Softmax(q k^T / sqrt(d) + (m^T - 1) * 1e4)
  x = x + ((attn v) @ Wproj + b) * m;  x = x + ((GELU(LN2(x) @ W1 + b1) * m) @ W2 + b2) * m
The class token's output after the last block gives the logits (A-ViT's ponder-weighted output is
the same for the class token, which only halts at the last block). Block 0 is dense. Masks are
graph outputs `mask_blocks_<l>` (float 0/1, [B, N], index 0 = class token) for l = 1..depth-1.

Weights (no pretrained weights exist here): fixed seed; linears N(0, g^2/fan_in) with gains as
in models/zoo.py; LayerNorm affine near identity. The halting channel (embedding dim 0) is made
content dependent: in every block the attention projection writes nothing to dim 0, and fc2's
row 0 (weights and bias) is fitted by ridge regression so that after the block x[:, k, 0] is minus
the token's centre-surround saliency (common.saliency averaged over the patch, standardised over
the calibration frames): salient tokens run longer. beta_l is then set by bisection so that the
fraction of patch tokens still active in block l+1, over the calibration frames (48 vtest frames +
10 still photos), follows a geometric schedule q^l whose mean over the masked blocks is d. The
classifier is rescaled to a logit standard deviation of ~2 with the bias centred.
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

SEED = 20241108
GAMMA = 4.0
EPS = 0.01
CONFIGS = {
    "small": dict(h=72, w=96, patch=8, dim=64, depth=6, heads=2, mlp=4, classes=10),
    "full": dict(h=224, w=224, patch=16, dim=384, depth=12, heads=6, mlp=4, classes=1000),
}


class Block(nn.Module):
    def __init__(self, dim, heads, mlp):
        super().__init__()
        self.heads = heads
        self.hd = dim // heads
        self.scale = self.hd ** -0.5
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = nn.Module()
        self.attn.qkv = nn.Linear(dim, 3 * dim)
        self.attn.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Module()
        self.mlp.fc1 = nn.Linear(dim, dim * mlp)
        self.mlp.act = nn.GELU()
        self.mlp.fc2 = nn.Linear(dim * mlp, dim)
        self.record = None

    def forward(self, x, m):
        B, N, C = x.shape
        y = self.attn.qkv(self.norm1(x))
        if m is not None:
            y = y * m
        qkv = y.reshape(B, N, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        a = (q @ k.transpose(-2, -1)) * self.scale
        if m is not None:
            a = a + (m.transpose(1, 2).unsqueeze(1) - 1.0) * 1e4
        a = a.softmax(dim=-1)
        o = (a @ v).transpose(1, 2).reshape(B, N, C)
        o = self.attn.proj(o)
        if m is not None:
            o = o * m
        x = x + o
        hdn = self.mlp.act(self.mlp.fc1(self.norm2(x)))
        if m is not None:
            hdn = hdn * m
        if self.record is not None:
            self.record.append((x.detach(), hdn.detach(),
                                None if m is None else m.detach()))
        o = self.mlp.fc2(hdn)
        if m is not None:
            o = o * m
        return x + o


class AViT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["dim"]
        self.gh, self.gw = cfg["h"] // cfg["patch"], cfg["w"] // cfg["patch"]
        n = self.gh * self.gw + 1
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(3, d, cfg["patch"], cfg["patch"])
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
        self.pos_embed = nn.Parameter(torch.zeros(1, n, d))
        self.blocks = nn.ModuleList([Block(d, cfg["heads"], cfg["mlp"]) for _ in range(cfg["depth"])])
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.head = nn.Linear(d, cfg["classes"])
        self.register_buffer("halt_beta", torch.zeros(cfg["depth"]))
        not_cls = torch.ones(1, n)
        not_cls[0, 0] = 0.0
        self.register_buffer("not_cls", not_cls)
        self.use_masks = True
        self.n_halting = cfg["depth"] - 1   # blocks after which halting is evaluated

    def forward(self, img):
        x = self.patch_embed.proj(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        c, m, masks = None, None, []
        for i, blk in enumerate(self.blocks):
            x = blk(x, m)
            if i < self.n_halting and self.use_masks:
                h = torch.sigmoid(GAMMA * x[:, :, 0] + self.halt_beta[i]) * self.not_cls
                c = h if c is None else c + h
                mf = (c < 1.0 - EPS).float()
                masks.append(mf)
                m = mf.unsqueeze(-1)
        x = self.norm(x)
        return (self.head(x[:, 0]), *masks)


def init_weights(model, cfg, seed):
    g = torch.Generator().manual_seed(seed)
    d = cfg["dim"]

    def lin(mod, gain):
        mod.weight.data = torch.randn(mod.weight.shape, generator=g) * gain / np.sqrt(mod.in_features)
        mod.bias.data = torch.randn(mod.bias.shape, generator=g) * 0.02

    p = model.patch_embed.proj
    fan = 3 * cfg["patch"] ** 2
    p.weight.data = torch.randn(p.weight.shape, generator=g) * np.sqrt(2.0 / fan)
    p.bias.data = torch.randn(p.bias.shape, generator=g) * 0.02
    model.cls_token.data = torch.randn(1, 1, d, generator=g) * 0.1
    model.pos_embed.data = torch.randn(model.pos_embed.shape, generator=g) * 0.1
    for b in model.blocks:
        for ln in (b.norm1, b.norm2):
            ln.weight.data = torch.empty(d).uniform_(0.8, 1.2, generator=g)
            ln.bias.data = torch.randn(d, generator=g) * 0.05
        lin(b.attn.qkv, 1.0)
        lin(b.attn.proj, 0.7)
        lin(b.mlp.fc1, np.sqrt(2.0))
        lin(b.mlp.fc2, 0.7)
        b.attn.proj.weight.data[0] = 0.0   # the halting channel: attention writes nothing to dim 0
        b.attn.proj.bias.data[0] = 0.0
    model.norm.weight.data = torch.empty(d).uniform_(0.8, 1.2, generator=g)
    model.norm.bias.data = torch.randn(d, generator=g) * 0.05
    lin(model.head, 1.0)


def geometric_schedule(d, n):
    """q with mean(q^1..q^n) = d."""
    lo, hi = 1e-6, 1.0
    for _ in range(100):
        q = (lo + hi) / 2
        if np.mean([q ** i for i in range(1, n + 1)]) < d:
            lo = q
        else:
            hi = q
    return [q ** i for i in range(1, n + 1)]


@torch.no_grad()
def run_batched(model, x, bs=16):
    outs = []
    for i in range(0, len(x), bs):
        o = model(torch.from_numpy(x[i:i + bs]))
        outs.append([t.numpy() for t in o])
    return [np.concatenate([o[k] for o in outs]) for k in range(len(outs[0]))]


class StopForward(Exception):
    pass


@torch.no_grad()
def run_until(model, x, li, bs=16):
    """Inputs of block li's fc2 (and the residual stream before the MLP, the mask) and block li's
    output, on every frame; the blocks after li are not run."""
    blk = model.blocks[li]
    rec, outs = [], []

    def hook(mod, inp, out):
        outs.append(out.detach())
        raise StopForward

    blk.record = rec
    hk = blk.register_forward_hook(hook)
    for i in range(0, len(x), bs):
        try:
            model(torch.from_numpy(x[i:i + bs]))
        except StopForward:
            pass
    hk.remove()
    blk.record = None
    return rec, torch.cat(outs)


@torch.no_grad()
def fit_halting(model, x, sal, density, lam=1e-2):
    n_tok = model.gh * model.gw
    t = np.stack([common.area_resize(s, model.gh, model.gw) for s in sal])
    from scipy.ndimage import gaussian_filter
    t = np.stack([gaussian_filter(m, 0.7) for m in t])
    t = (t - t.mean()) / (t.std() + 1e-9)
    target = torch.from_numpy(-t.reshape(len(t), n_tok)).double()         # B, tokens
    sched = geometric_schedule(density, model.n_halting)
    not_cls = model.not_cls.double()
    c_prev = torch.zeros(len(x), n_tok + 1, dtype=torch.float64)
    for li in range(len(sched)):
        model.n_halting = li   # the masks of blocks 1..li are active while fitting block li
        blk = model.blocks[li]
        rec, _ = run_until(model, x, li)
        xm = torch.cat([r[0] for r in rec]).double()[:, 1:]                 # B, tokens, D
        hdn = torch.cat([r[1] for r in rec]).double()[:, 1:]                # B, tokens, 4D
        act = (torch.ones(xm.shape[:2], dtype=torch.bool) if rec[0][2] is None else
               torch.cat([r[2] for r in rec])[:, 1:, 0] > 0.5)
        H = hdn[act]
        y = (target - xm[..., 0])[act]
        mu, sd = H.mean(0), H.std(0) + 1e-6
        Hs = (H - mu) / sd
        A = Hs.T @ Hs / len(Hs) + lam * torch.eye(H.shape[1], dtype=torch.float64)
        beta = torch.linalg.solve(A, Hs.T @ (y - y.mean()) / len(Hs))
        pred = Hs @ beta + y.mean()
        r2 = 1 - float(((pred - y) ** 2).mean() / ((y - y.mean()) ** 2).mean())
        fc2 = blk.mlp.fc2
        fc2.weight.data[0] = (beta / sd).float()
        fc2.bias.data[0] = float(y.mean() - (mu / sd) @ beta)
        # threshold: bisection on beta_l for the scheduled density in block li+1
        _, out = run_until(model, x, li)
        z = out[:, :, 0].double()
        lo, hi = -60.0, 60.0
        for _ in range(80):
            mid = (lo + hi) / 2
            c = c_prev + torch.sigmoid(GAMMA * z + mid) * not_cls
            dens = float((c[:, 1:] < 1.0 - EPS).double().mean())
            if dens > sched[li]:
                lo = mid     # too many tokens active: a larger beta halts more
            else:
                hi = mid
        b_l = (lo + hi) / 2
        model.halt_beta[li] = b_l
        c_prev = c_prev + torch.sigmoid(GAMMA * z + float(model.halt_beta[li])) * not_cls
        dens = float((c_prev[:, 1:] < 1.0 - EPS).double().mean())
        print(f"  block {li}: halting channel fit R^2 {r2:.2f} (on {int(act.sum())} active tokens), "
              f"beta {b_l:+.3f}, density in block {li + 1}: {dens:.3f} (target {sched[li]:.3f})")
    model.n_halting = len(sched)


@torch.no_grad()
def calibrate_head(model, x, target_std=2.0):
    feats = []
    hk = model.head.register_forward_pre_hook(lambda m, i: feats.append(i[0].detach().double()))
    run_batched(model, x)
    hk.remove()
    f = torch.cat(feats)
    w = model.head.weight.data.double()
    logits = (f - f.mean(0)) @ w.T
    s = target_std / float(logits.std())
    model.head.weight.data = (w * s).float()
    model.head.bias.data = (-(w * s) @ f.mean(0) + model.head.bias.data.double()).float()


def calibration_set(h, w):
    vt = common.vtest_paths()
    idx = np.linspace(0, len(vt) - 1, 48).round().astype(int)
    paths = [vt[i] for i in idx] + common.photo_paths()[:10]
    return [common.load_rgb(p, w, h) for p in paths]


def calibrated(size, density):
    """The model with calibrated weights (module docstring) and its calibration batch."""
    cfg = CONFIGS[size]
    torch.manual_seed(SEED)
    model = AViT(cfg).eval()
    init_weights(model, cfg, SEED + (0 if size == "small" else 1))
    imgs = calibration_set(cfg["h"], cfg["w"])
    x = common.to_input(imgs, common.IMAGENET_MEAN, common.IMAGENET_STD)
    sal = [common.saliency(im) for im in imgs]
    fit_halting(model, x, sal, density)
    calibrate_head(model, x)
    return model, x


def build(size, density, out_dir, dataset=True):
    cfg = CONFIGS[size]
    h, w = cfg["h"], cfg["w"]
    model, x = calibrated(size, density)
    tag = f"avit_{size}_d{round(density * 100):02d}"
    path = os.path.join(out_dir, f"{tag}.onnx")
    blocks = list(range(1, cfg["depth"]))
    mask_names = [f"mask_blocks_{l}" for l in blocks]
    props = {"dynaspa.mean": ",".join(map(str, common.IMAGENET_MEAN)),
             "dynaspa.std": ",".join(map(str, common.IMAGENET_STD)),
             "dynaspa.model": tag, "dynaspa.family": "avit", "dynaspa.density": density,
             "dynaspa.masks": ",".join(mask_names),
             "dynaspa.token_grid": f"{model.gh}x{model.gw}",
             "dynaspa.source": "models/avit.py (synthetic weights, fixed seed, calibrated on "
                               "models/frames)"}
    doc = (f"A-ViT ({size}): {h}x{w}, patch {cfg['patch']}, dim {cfg['dim']}, depth {cfg['depth']}, "
           f"heads {cfg['heads']}, adaptive token halting (gamma {GAMMA}, eps {EPS}), mean token "
           f"density over masked blocks {density}; synthetic weights")
    m = common.export(model, (torch.from_numpy(x[:1]),), path, ["input"], ["logits"] + mask_names,
                      props, doc)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{tag}: {n_params:,} params, {len(m.graph.node)} nodes, "
          f"{os.path.getsize(path) / 1e6:.2f} MB -> {path}")
    print(f"  ops: {' '.join(common.op_set(path))}")
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
    # sparse ops: every MatMul of a masked block (qkv, q k^T, attn v, proj, fc1, fc2)
    ops = []
    for k, l in enumerate(blocks):
        names = [n.name for n in m.graph.node if n.op_type == "MatMul" and n.name.startswith(f"/blocks.{l}/")]
        assert len(names) == 6, (l, names)
        ops += [(n, k, 1, 1) for n in names]
    if dataset:
        write_dataset(path, tag, size, density, mask_names, ops, out_dir, model.gh, model.gw)
    return path


def write_dataset(path, tag, size, density, map_names, ops, out_dir, gh, gw):
    cfg = CONFIGS[size]
    h, w = cfg["h"], cfg["w"]
    sess = common.ort_session(path)
    frames, per_map = [], {n: [] for n in map_names}
    paths = common.vtest_paths()
    for i in range(0, len(paths), 8):
        xb = common.to_input([common.load_rgb(p, w, h) for p in paths[i:i + 8]],
                             common.IMAGENET_MEAN, common.IMAGENET_STD)
        res = sess.run(map_names, {"input": xb})
        for j in range(len(xb)):
            assert all(r[j, 0] == 1.0 for r in res), "class token halted"
            fr = [r[j, 1:].reshape(gh, gw) > 0.5 for r in res]
            frames.append(fr)
            for n, mm in zip(map_names, fr):
                per_map[n].append(mm)
    maps = [(n, gh, gw, 1) for n in map_names]
    meta = {"model": f"models/{tag}.onnx", "family": "avit", "density_target": density,
            "frames": [os.path.relpath(p, common.ROOT) for p in paths],
            "token_layout": "row-major patch grid; the class token (index 0 in the graph) is the "
                            "one always-active prefix token",
            "source": "vtest.avi frames 0,3,...,597 (models/frames/vtest), ONNX Runtime, "
                      "graph optimisations disabled",
            "producer": "models/avit.py"}
    dsm = os.path.join(out_dir, "masks", f"{tag}.dsm")
    nbytes = common.write_mask_dataset(dsm, meta, maps, ops, frames)
    stats = [(n, common.mask_stats(per_map[n])) for n in map_names]
    mean_d = float(np.mean([s["density"] for _, s in stats]))
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
