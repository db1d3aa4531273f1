"""A-ViT (Yin et al., CVPR 2022) exported from the authors' own code: the token-halting forward
(`forward_features_act_token`, act_mode 4) of NVlabs/A-ViT's vendored
timm/models/act_vision_transformer.py VisionTransformer, built as models_act.py builds it.

Imports NVlabs/A-ViT from a checkout given with --repo (nothing of it is copied here):
  git clone https://github.com/NVlabs/A-ViT && git -C A-ViT checkout 120c9cb90acf86828f1c61dd42c08722aa7173c7
Its bundled `timm` (a modified timm 0.4.x) is imported from that checkout, not the installed timm.

Model: avit_act_e96: VisionTransformer(patch_size=16, embed_dim=96, depth=12, num_heads=3,
mlp_ratio=4, qkv_bias=True, LayerNorm eps 1e-6) (avit_tiny_patch16_224's arguments with
embed_dim 96 instead of 192), 224x224, args act_mode=4, gate_scale=10, gate_center=30 (the
authors' tiny recipe, README), distr_prior_alpha=0 (a training-only loss term). Random weights
from the authors' own init, then calibrated (below).

Shims (the smallest that make the authors' forward traceable; its arithmetic is unchanged):
  1. torch.Tensor.cuda returns the tensor itself (the forward allocates its halting state with
     `.cuda()`; here everything is on the CPU). Applied to the PyTorch reference runs too.
  2. Block_ACT.forward_act is wrapped to multiply its input by (1 - mask) first. The forward does
     `out.data = out.data * mask_token` right before calling forward_act(out, 1 - mask_token);
     a tracer does not record writes through `.data`, so without this the exported graph would
     skip that multiplication. The mask is binary, so in PyTorch (where the `.data` write does
     happen) the extra multiplication changes nothing: the reference forward is the authors'.
  3. The same wrapper records forward_act's `mask` argument (1 - the halting mask) so the check
     below can compare the halting masks of PyTorch and ONNX Runtime.

Calibration (random weights carry no halting behaviour): for each block l < 11 in order, with the
earlier blocks' halting active, row 0 of mlp.fc2 (it writes x[:, :, 0], the halting channel) is
fitted by ridge regression from the block's MLP hidden features so that the halting score
sigmoid(10 x0 - 30) of a token follows its saliency (salient tokens get small scores and run
longer); then one offset on all those rows is set by bisection so the mean fraction of active
patch tokens over blocks 1-11 is --density (0.3). The head is rescaled to a logit std of ~2.
"""
import argparse
import contextlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calib  # noqa: E402
from calib import common  # noqa: E402

SEED = 20240604
NAME = "avit_act_e96"
H = W = 224
GATE_SCALE, GATE_CENTER = 10.0, 30.0


@contextlib.contextmanager
def shims(block_cls, record):
    """Shim 1 (Tensor.cuda -> identity) and shims 2-3 (forward_act wrapper)."""
    import torch
    orig_cuda, orig_fa = torch.Tensor.cuda, block_cls.forward_act

    def forward_act(self, x, mask=None):
        if mask is not None:
            bs, token, _ = x.shape
            x = x * (1 - mask).view(bs, token, 1)
            record.append(mask)
        return orig_fa(self, x, mask)
    torch.Tensor.cuda = lambda self, *a, **k: self
    block_cls.forward_act = forward_act
    try:
        yield
    finally:
        torch.Tensor.cuda, block_cls.forward_act = orig_cuda, orig_fa


def build(repo, density):
    import torch
    import torch.nn as nn
    from functools import partial
    sys.path.insert(0, repo)
    for k in list(sys.modules):
        if k.split(".")[0] == "timm":
            del sys.modules[k]
    with contextlib.redirect_stdout(open(os.devnull, "w")):
        import models_act  # noqa: F401  (registers avit_* in the bundled timm)
        from timm.models import act_vision_transformer as AV
        args = argparse.Namespace(act_mode=4, gate_scale=GATE_SCALE, gate_center=GATE_CENTER,
                                  distr_prior_alpha=0.0)
        torch.manual_seed(SEED)
        net = AV.VisionTransformer(patch_size=16, embed_dim=96, depth=12, num_heads=3, mlp_ratio=4,
                                   qkv_bias=True, norm_layer=partial(nn.LayerNorm, eps=1e-6),
                                   args=args).eval()
    record = []
    imgs, _ = calib.calibration_set(H, W)
    x = torch.from_numpy(common.to_input(imgs, common.IMAGENET_MEAN, common.IMAGENET_STD))
    sal = [common.saliency(im) for im in imgs]
    g = 14
    z = calib.target_map(sal, g, g).reshape(len(x), g * g)           # standardised saliency per token
    z = np.concatenate([np.full((len(x), 1), 2.0), z], 1)            # class token: treated as salient
    beta, alpha0 = 1.5, -1.0
    target = (GATE_CENTER + alpha0 - beta * z) / GATE_SCALE          # wanted x[:, :, 0] after a block

    def run(xx):
        record.clear()
        with torch.no_grad():
            return net(xx)

    with shims(AV.Block_ACT, record):
        for li, blk in enumerate(net.blocks[:-1]):
            got = {}

            def pre_norm2(m, i):
                got["mid"] = i[0][:, :, 0].detach().double()

            def pre_fc2(m, i):
                got["hid"] = i[0].detach().double()
                raise calib.StopForward
            hooks = [blk.norm2.register_forward_pre_hook(pre_norm2),
                     blk.mlp.fc2.register_forward_pre_hook(pre_fc2)]
            try:
                run(x)
            except calib.StopForward:
                pass
            for hk in hooks:
                hk.remove()
            active = (1 - record[li]).numpy() > 0.5                  # tokens running block li
            hid = got["hid"][torch.from_numpy(active)]
            y = (target - got["mid"].numpy())[active]
            w, b0, pred, r2 = calib.ridge(hid, y, 1e-2)
            blk.mlp.fc2.weight.data[0] = w.float()
            blk.mlp.fc2.bias.data[0] = float(b0)
            print(f"  block {li}: {active[:, 1:].mean():.2f} of patch tokens active, ridge R^2 {r2:.2f}")
        base = [float(b.mlp.fc2.bias.data[0]) for b in net.blocks[:-1]]

        def density_at(delta):
            for b, b0 in zip(net.blocks[:-1], base):
                b.mlp.fc2.bias.data[0] = b0 + delta
            run(x)
            return float(np.mean([(1 - m[:, 1:]).mean().item() for m in record[1:]]))
        lo, hi = -1.0, 1.0       # larger delta -> larger x0 -> larger halting score -> fewer tokens
        for _ in range(40):
            mid = (lo + hi) / 2
            if density_at(mid) > density:
                lo = mid
            else:
                hi = mid
        dens = density_at((lo + hi) / 2)
        print(f"  halting offset {(lo + hi) / 2:+.4f}: mean patch-token density over blocks 1-11 {dens:.3f}")
        # head: logit std ~2, centred
        feats = []
        hk = net.head.register_forward_pre_hook(lambda m, i: feats.append(i[0].detach().double()))
        run(x)
        hk.remove()
        f = torch.cat(feats)
        wh = net.head.weight.data.double()
        s = 2.0 / float(((f - f.mean(0)) @ wh.T).std())
        net.head.weight.data = (wh * s).float()
        net.head.bias.data = (-(wh * s) @ f.mean(0)).float()

        # export (shims active) and PyTorch reference runs (shims active: same arithmetic)
        path = os.path.join(calib.HERE, f"{NAME}.onnx")
        record.clear()
        origin = {"repo": "NVlabs/A-ViT", "commit": calib.repo_commit(repo),
                  "file": "timm/models/act_vision_transformer.py (built as models_act.py avit_tiny_patch16_224)",
                  "class": "VisionTransformer(embed_dim=96, depth=12, num_heads=3) forward_features_act_token",
                  "license": LICENSE_NOTE,
                  "shims": "Tensor.cuda -> identity; Block_ACT.forward_act input multiplied by (1 - mask) "
                           "(the untraced `out.data = out.data * mask_token`); mask recorded"}
        props = {"dynaspa.mean": ",".join(map(str, common.IMAGENET_MEAN)),
                 "dynaspa.std": ",".join(map(str, common.IMAGENET_STD)),
                 "dynaspa.source": f"models/authors/avit_authors.py: NVlabs/A-ViT@{origin['commit'][:12]} "
                                   f"{origin['file']} {origin['class']}",
                 "dynaspa.license": LICENSE_NOTE}
        net.c_token = None
        m = calib.export(net, (x[:1],), path, ["input"], ["logits"], props,
                         "A-ViT token halting (authors' code, random calibrated weights, fixed seed)")
        mv = calib.mask_values(m)
        # Less(c, 0.99) appears twice per block (not_reached_token, mask_token): one per distinct c
        less, seen = [], set()
        for t in mv:
            if t[2] and "Less" in t[2] and t[0] not in seen:
                seen.add(t[0])
                less.append(t)
        n_params = sum(p.numel() for p in net.parameters())
        worst, worst_all, flips, cells, dens_frames, per_block, flipped = 0.0, 0.0, 0, 0, [], [], 0
        for j in range(len(x)):
            net.c_token = None
            ref = run(x[j:j + 1]).numpy()
            ref_masks = [(1 - r).numpy() for r in record[1:]]          # halting masks for blocks 1..11
            res = calib.ort_run(path, {"input": x[j:j + 1].numpy()}, ["logits"], [t[3] for t in less])
            err = common.rel_l2(res[0], ref)
            ort_masks = [np.asarray(v, np.float32) for v in res[1:]][:len(ref_masks)]
            f = sum(int((a != b).sum()) for a, b in zip(ort_masks, ref_masks))
            flips, flipped = flips + f, flipped + (f > 0)
            cells += sum(a.size for a in ort_masks)
            worst_all = max(worst_all, err)
            if f == 0:
                worst = max(worst, err)
            dens_frames.append(float(np.mean([r[:, 1:].mean() for r in ref_masks])))
            per_block.append([float(r[:, 1:].mean()) for r in ref_masks])
        print(f"{NAME}: ORT vs authors' PyTorch forward on {len(x)} frames: halting masks identical on "
              f"{len(x) - flipped}, worst logits rel L2 there {worst:.1e}; {flipped} frames with {flips} of "
              f"{cells} mask positions flipped (rel L2 up to {worst_all:.1e}); mean patch-token density "
              f"{np.mean(dens_frames):.3f}")
        checks = {"origin": origin, "ort_vs_pytorch_rel_l2_no_flip_frames": worst,
                  "ort_vs_pytorch_frames_with_flips": int(flipped), "ort_vs_pytorch_mask_flips": flips,
                  "ort_vs_pytorch_rel_l2_all_frames": worst_all,
                  "mask_cells_checked": cells, "calibration_frames": len(x),
                  "density_per_block_1_to_11": np.mean(per_block, 0).round(4).tolist()}
        calib.report(NAME, path, m, n_params, [1, 3, H, W], float(np.mean(dens_frames)), checks)

    write_goldens(path)
    return path


def write_goldens(path):
    def feeds(img):
        return {"input": common.to_input([common.load_rgb(img, W, H)], common.IMAGENET_MEAN,
                                         common.IMAGENET_STD)}
    calib.write_goldens(NAME, path, f"<image> -> PIL bilinear resize to {W}x{H} -> /255 -> (x-mean)/std "
                        "(ImageNet) -> NCHW float32", feeds, ["logits"],
                        note="masks: Cast(Greater(c, 0.99)) (reached) and Cast(Less(c, 0.99)) (still running) "
                             "of the cumulative halting score c after each block")


LICENSE_NOTE = ("NVlabs/A-ViT: source headers say 'Copyright (C) 2022 NVIDIA Corporation. All rights "
                "reserved. Nvidia Source Code License-NC'; README says 'This work is made available under "
                "the Nvidia Source Code License (1-Way Commercial). To view a copy of this license, visit "
                "the LICENSE file in this repository.' and pre-trained models CC-BY-NC-SA-4.0; the LICENSE "
                "file in the repository is the Apache License 2.0 text with 'Copyright 2020 - present, "
                "Facebook, Inc' (DeiT's). Non-commercial terms may apply; no A-ViT weights are used here.")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True, help="checkout of github.com/NVlabs/A-ViT")
    ap.add_argument("--density", type=float, default=0.3)
    ap.add_argument("--goldens-only", action="store_true", help="only rewrite the goldens of the committed file")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(os.cpu_count() or 1)
    if args.goldens_only:
        write_goldens(os.path.join(calib.HERE, f"{NAME}.onnx"))
    else:
        build(args.repo, args.density)
    return 0


if __name__ == "__main__":
    sys.exit(main())
