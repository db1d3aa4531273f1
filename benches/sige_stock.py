"""Export SIGE's GauGAN generators at their stock size for RESULTS.md's "An edit against its
original", and write an original/edited input pair.

    python3 benches/sige_stock.py --repo SIGE_CHECKOUT [--out target/sige_stock] [--only spade sub_mobile]

The generators come from the authors' code in a checkout of lmxyy/sige (as
models/authors/sige_authors.py, which exports the test-sized variants the goldens use):
  gaugan_ngf64     SPADEGenerator, gaugan/test.py's options: ngf 64, crop_size 512 (a 36x256x512
                   semantic map -> 3x256x512 image)
  gc_gaugan        SubMobileSPADEGenerator, config_str 32_32_32_48_32_24_24_32 (the README's
                   GAN Compression GauGAN), ngf 64, crop_size 512
Random weights, BatchNorm statistics from 8 real frames. TorchScript exporter, opset 17.

The pair: `original.npy` is the semantic map of a vtest frame; `edited_P.npy` relabels a
rectangle covering P percent of the positions (P = 1, 5, 10) to one class, its instance edges
redrawn, as an editor that paints a region with another label would.
"""

import argparse
import contextlib
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "models", "authors"))
import calib  # noqa: E402
import sige_authors as sa  # noqa: E402

H, W = 256, 512
EDITS = (1, 5, 10)


def build(repo, kind):
    import torch
    sys.path[:0] = [repo, os.path.join(repo, "gaugan")]
    with contextlib.redirect_stdout(open(os.devnull, "w")):
        opt = sa.gaugan_opt(64, None if kind == "spade" else "32_32_32_48_32_24_24_32")
        opt.crop_size = W
        torch.manual_seed(sa.SEED)
        if kind == "spade":
            from models.spade_generators.spade_generator import SPADEGenerator
            net = SPADEGenerator(opt).eval()
        else:
            from models.sub_mobile_spade_generators.sub_mobile_spade_generator import SubMobileSPADEGenerator
            net = SubMobileSPADEGenerator(opt, config={"channels": [int(c) for c in opt.config_str.split("_")]}).eval()
    sys.path[:2] = []
    sa.init_random(net, sa.SEED)
    return net


def semantic_maps(n):
    pal = np.load(os.path.join(calib.HERE, "sige_palette.npy"))
    imgs, _ = calib.calibration_set(H, W, n_vtest=n, n_photos=0)
    return [sa.semantic_map(im, pal).astype(np.float32) for im in imgs]


def edited(seg, percent):
    """`seg` with a centred rectangle of `percent`% of the positions relabelled to class 5."""
    e = seg.copy()
    area = H * W * percent / 100
    h = int(round(np.sqrt(area / 2)))
    w = int(round(area / h))
    y0, x0 = (H - h) // 2, (W - w) // 3
    lab = e[0, :sa.N_LABELS].argmax(0)
    lab[y0:y0 + h, x0:x0 + w] = 5
    return sa.label_map(lab).astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True, help="checkout of github.com/lmxyy/sige")
    ap.add_argument("--out", default="target/sige_stock")
    ap.add_argument("--only", nargs="+", default=["spade", "sub_mobile"])
    a = ap.parse_args()
    import torch
    torch.set_num_threads(os.cpu_count() or 1)
    os.makedirs(a.out, exist_ok=True)
    segs = semantic_maps(8)
    x = torch.from_numpy(np.concatenate(segs))
    orig = segs[3]
    np.save(os.path.join(a.out, "original.npy"), orig)
    for p in EDITS:
        e = edited(orig, p)
        changed = float((np.abs(e - orig).max(1) > 0).mean())
        np.save(os.path.join(a.out, f"edited_{p}.npy"), e)
        print(f"edited_{p}.npy: {changed:.3f} of the positions differ from original.npy")
    for kind in a.only:
        name = "gaugan_ngf64" if kind == "spade" else "gc_gaugan"
        net = build(a.repo, kind)
        calib.full_bn_pass(net, net, x)
        sa.scale_last_conv(net, net.conv_img, net, x)
        path = os.path.join(a.out, f"{name}.onnx")
        calib.export(net, (x[:1],), path, ["input"], ["output"],
                     {"dynaspa.source": f"benches/sige_stock.py: lmxyy/sige@{calib.repo_commit(a.repo)[:12]} {name}",
                      "dynaspa.license": sa.LICENSE}, f"{name} from SIGE's repository (random weights)")
        ref = net(torch.from_numpy(orig)).detach().numpy()
        res = calib.ort_run(path, {"input": orig}, ["output"])[0]
        n_params = sum(p.numel() for p in net.parameters())
        print(f"{path}: {n_params:,} parameters, {os.path.getsize(path) / 1e6:.0f} MB, "
              f"ONNX Runtime vs PyTorch rel L2 {sa.common.rel_l2(res, ref):.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
