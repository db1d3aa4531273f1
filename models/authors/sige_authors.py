"""The dense generators SIGE (Li et al., NeurIPS 2022) accelerates, exported stock from the code in
lmxyy/sige: GauGAN's SPADE generator, the GAN-Compression sub-mobile SPADE generator and the DDPM
U-Net. These are the original (dense) models; SIGE's sparse versions need its C++/CUDA gather /
scatter kernels and are not exported. The graphs hold no mask: SIGE's sparsity comes from the
edit (delta mode in dynaspa).

Imports lmxyy/sige from a checkout given with --repo (nothing of it is copied here):
  git clone https://github.com/lmxyy/sige && git -C sige checkout ef8b1234b07c14e1339dbbe5eeb0abe5f9902c8d
Only PyPI packages are needed (torch, pyyaml); `sige.nn` is imported from the checkout without
its compiled extensions (gaugan/models/mobile_modules.py imports it; nothing of it runs here).

Models (random weights, fixed seeds, BatchNorm statistics calibrated on frames):
  sige_gaugan_ngf8      gaugan/models/spade_generators/spade_generator.py SPADEGenerator, the
                        options of gaugan/test.py (norm_G spadesyncbatch3x3, num_upsampling_layers
                        more, input_nc 35 + instance edge) with ngf 8 (stock 64) and crop_size 128
                        (stock 512): 36x64x128 semantic map -> 3x64x128 image
  sige_gc_gaugan_q      gaugan/models/sub_mobile_spade_generators/sub_mobile_spade_generator.py
                        SubMobileSPADEGenerator with config_str 8_8_8_12_8_6_6_8 (the README's
                        GAN-Compression 32_32_32_48_32_24_24_32 divided by 4), ngf 16, crop 128
  sige_ddpm_unet_c32    diffusion/models/ddpm_arch/unet.py UNet of configs/church_ddpm256-original.yml
                        with ch 32 (stock 128), ch_mult [1, 2, 2] (stock [1,1,2,2,4,4]),
                        num_res_blocks 1 (stock 2), image_size 64 (stock 256), attention at 16
                        (as stock): inputs x [1,3,64,64] and t [1] (float timestep)

Inputs from real frames: the semantic map of a frame is its pixels' nearest of 35 colour
centroids (k-means over the calibration frames, fixed seed) as one-hot channels, plus GauGAN's
instance-edge channel (label boundaries), at 64x128. The U-Net's x is a 64x64 frame in [-1, 1]
noised to t = 500 with the config's linear beta schedule (SDEdit's starting point), fixed noise.
"""
import argparse
import contextlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calib  # noqa: E402
from calib import common  # noqa: E402

SEED = 20240605
LICENSE = ("BSD-style (lmxyy/sige LICENSE 'For SIGE software', Copyright (c) 2020, Muyang Li, Ji Lin, "
           "Chenlin Meng, Stefano Ermon, Song Han, and Jun-Yan Zhu; redistribution with the notice)")
N_LABELS = 35
SEG_H, SEG_W = 64, 128


def palette(frames):
    """35 colour centroids: k-means (fixed seed) over pixels of the calibration frames."""
    rng = np.random.default_rng(SEED)
    px = np.concatenate([f.reshape(-1, 3) for f in frames])
    px = px[rng.choice(len(px), 60000, replace=False)]
    c = px[rng.choice(len(px), N_LABELS, replace=False)]
    for _ in range(25):
        lab = ((px[:, None] - c[None]) ** 2).sum(-1).argmin(1)
        for k in range(N_LABELS):
            if (lab == k).any():
                c[k] = px[lab == k].mean(0)
    return c


def semantic_map(img, pal):
    """HxWx3 [0,1] -> [1, 36, H, W]: one-hot nearest palette colour + instance-edge channel."""
    return label_map(((img[:, :, None] - pal[None, None]) ** 2).sum(-1).argmin(-1))


def label_map(lab):
    """HxW labels -> [1, 36, H, W]: one-hot labels + instance-edge channel (a 4-neighbour differs)."""
    onehot = (lab[None] == np.arange(N_LABELS)[:, None, None]).astype(np.float32)
    e = np.zeros(lab.shape, bool)
    e[:, 1:] |= lab[:, 1:] != lab[:, :-1]
    e[:, :-1] |= lab[:, 1:] != lab[:, :-1]
    e[1:] |= lab[1:] != lab[:-1]
    e[:-1] |= lab[1:] != lab[:-1]
    return np.concatenate([onehot, e[None].astype(np.float32)])[None]


def gaugan_opt(ngf, config_str=None):
    return argparse.Namespace(ngf=ngf, input_nc=N_LABELS, output_nc=3, semantic_nc=N_LABELS + 1,
                              norm_G="spadesyncbatch3x3", num_upsampling_layers="more", crop_size=SEG_W,
                              aspect_ratio=2, separable_conv_norm="instance", norm="instance",
                              config_str=config_str)


def init_random(net, seed):
    """PyTorch's default init redrawn from a fixed generator (He-uniform-like), biases small."""
    import torch
    import torch.nn as nn
    g = torch.Generator().manual_seed(seed)
    for m in net.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear, nn.ConvTranspose2d)):
            fan_in = m.weight[0].numel()
            m.weight.data = torch.randn(m.weight.shape, generator=g) * np.sqrt(1.0 / fan_in)
            if m.bias is not None:
                m.bias.data = torch.randn(m.bias.shape, generator=g) * 0.02
        elif isinstance(m, nn.GroupNorm):
            m.weight.data = 1 + 0.1 * torch.randn(m.weight.shape, generator=g)
            m.bias.data = 0.1 * torch.randn(m.bias.shape, generator=g)


def scale_last_conv(net, conv, run, x, std=0.6):
    import torch
    rec = []
    hk = conv.register_forward_hook(lambda m, i, o: rec.append(o.detach()))
    with torch.no_grad():
        run(x)
    hk.remove()
    s = std / float(torch.cat(rec).std())
    conv.weight.data *= s
    conv.bias.data *= s


def build_gaugan(repo, kind):
    import torch
    sys.path[:0] = [repo, os.path.join(repo, "gaugan")]
    with contextlib.redirect_stdout(open(os.devnull, "w")):
        if kind == "spade":
            from models.spade_generators.spade_generator import SPADEGenerator
            torch.manual_seed(SEED)
            net = SPADEGenerator(gaugan_opt(8)).eval()
            name, cls, file = "sige_gaugan_ngf8", "SPADEGenerator(ngf=8, crop_size=128)", \
                "gaugan/models/spade_generators/spade_generator.py"
        else:
            from models.sub_mobile_spade_generators.sub_mobile_spade_generator import SubMobileSPADEGenerator
            cfg = "8_8_8_12_8_6_6_8"
            torch.manual_seed(SEED + 1)
            net = SubMobileSPADEGenerator(gaugan_opt(16, cfg),
                                          config={"channels": [int(c) for c in cfg.split("_")]}).eval()
            name, cls, file = "sige_gc_gaugan_q", f"SubMobileSPADEGenerator(config_str={cfg}, ngf=16, crop_size=128)", \
                "gaugan/models/sub_mobile_spade_generators/sub_mobile_spade_generator.py"
    sys.path[:2] = []
    init_random(net, SEED + (0 if kind == "spade" else 1))
    imgs, _ = calib.calibration_set(SEG_H, SEG_W, n_vtest=24, n_photos=8)
    pal = palette(imgs)
    x = torch.from_numpy(np.concatenate([semantic_map(im, pal) for im in imgs]))
    calib.full_bn_pass(net, net, x)
    scale_last_conv(net, net.conv_img, net, x)
    np.save(os.path.join(calib.HERE, "sige_palette.npy"), pal.astype(np.float32))

    def feeds(img):
        return {"input": semantic_map(common.load_rgb(img, SEG_W, SEG_H), pal).astype(np.float32)}
    return finish(name, net, (x[:1],), ["input"], ["output"], feeds, file, cls, repo,
                  f"<image> -> PIL bilinear resize to {SEG_W}x{SEG_H} -> /255 -> nearest of the 35 colours "
                  "in models/authors/sige_palette.npy, one-hot [1,35,H,W] + instance-edge channel (label "
                  "differs from a 4-neighbour) -> [1,36,H,W] float32", [(x[j:j + 1],) for j in range(8)])


def ddpm_config():
    return argparse.Namespace(
        model=argparse.Namespace(attn_resolutions=[16], ch=32, ch_mult=[1, 2, 2], dropout=0.0, in_ch=3,
                                 num_res_blocks=1, out_ch=3, resamp_with_conv=True),
        data=argparse.Namespace(image_size=64))


def noised(img, t, seed):
    """Frame in [-1, 1] -> q(x_t | x_0) with the config's linear betas (1e-4..0.02, 1000 steps)."""
    betas = np.linspace(1e-4, 0.02, 1000, dtype=np.float64)
    abar = np.cumprod(1 - betas)[t]
    x0 = img.transpose(2, 0, 1)[None] * 2 - 1
    eps = np.random.default_rng(seed).standard_normal(x0.shape)
    return (np.sqrt(abar) * x0 + np.sqrt(1 - abar) * eps).astype(np.float32)


def build_ddpm(repo):
    import torch
    sys.path[:0] = [os.path.join(repo, "diffusion")]
    for k in list(sys.modules):
        if k.split(".")[0] == "models":
            del sys.modules[k]
    from models.ddpm_arch.unet import UNet
    sys.path[:1] = []
    torch.manual_seed(SEED + 2)
    net = UNet(argparse.Namespace(), ddpm_config()).eval()
    init_random(net, SEED + 2)
    imgs, paths = calib.calibration_set(64, 64, n_vtest=8, n_photos=4)
    t = torch.tensor([500.0])
    xs = [torch.from_numpy(noised(im, 500, k)) for k, im in enumerate(imgs)]

    def feeds(img):
        k = sum(map(ord, os.path.basename(img)))
        return {"x": noised(common.load_rgb(img, 64, 64), 500, k), "t": np.array([500.0], np.float32)}
    return finish("sige_ddpm_unet_c32", net, (xs[0], t), ["x", "t"], ["output"], feeds,
                  "diffusion/models/ddpm_arch/unet.py",
                  "UNet(ch=32, ch_mult=[1,2,2], num_res_blocks=1, attn_resolutions=[16], image_size=64)", repo,
                  "x: <image> -> PIL bilinear resize to 64x64 -> /255 -> *2-1 -> sqrt(abar_500) x + "
                  "sqrt(1-abar_500) eps (linear betas 1e-4..0.02 over 1000 steps; eps ~ N(0,1) from numpy "
                  "default_rng(sum of the file name's character codes)); t: [500.0]",
                  [(xx, t) for xx in xs])


def finish(name, net, args, in_names, out_names, feeds, file, cls, repo, preprocess, checks_in, n_cases=2):
    import torch
    path = os.path.join(calib.HERE, f"{name}.onnx")
    origin = {"repo": "lmxyy/sige", "commit": calib.repo_commit(repo), "file": file, "class": cls,
              "license": LICENSE}
    props = {"dynaspa.source": f"models/authors/sige_authors.py: lmxyy/sige@{origin['commit'][:12]} {file} {cls}",
             "dynaspa.license": LICENSE}
    m = calib.export(net, args, path, in_names, out_names, props,
                     f"{cls} from SIGE's repository (dense original; random weights, fixed seed)")
    worst = 0.0
    for a in checks_in:
        with torch.no_grad():
            ref = net(*a).numpy()
        res = calib.ort_run(path, {n: v.numpy() for n, v in zip(in_names, a)}, out_names)
        worst = max(worst, common.rel_l2(res[0], ref))
    n_params = sum(p.numel() for p in net.parameters())
    print(f"{name}: ORT vs authors' PyTorch forward on {len(checks_in)} inputs: worst rel L2 {worst:.1e}")
    calib.report(name, path, m, n_params, list(args[0].shape), None,
                 {"origin": origin, "ort_vs_pytorch_rel_l2": worst, "frames_checked": len(checks_in)})
    calib.write_goldens(name, path, preprocess, feeds, out_names, n_cases=n_cases,
                       note="no mask in the graph (dense generator)")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True, help="checkout of github.com/lmxyy/sige")
    ap.add_argument("--only", nargs="+", default=["spade", "sub_mobile", "ddpm"])
    args = ap.parse_args()
    import torch
    torch.set_num_threads(os.cpu_count() or 1)
    for k in args.only:
        if k == "ddpm":
            build_ddpm(args.repo)
        else:
            build_gaugan(args.repo, k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
