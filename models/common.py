"""Shared pieces of the model-family exporters (dynconv.py, avit.py, sige.py) and
tests/goldens/make_family_goldens.py: frames, saliency, image edits, ONNX export and checks,
mask statistics and the bit-packed mask dataset writer (format: models/masks/FORMAT.md)."""
import glob
import json
import os
import struct
import zlib

import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FRAMES = os.path.join(ROOT, "models", "frames")
VTEST_FRAMES = list(range(0, 600, 3))  # 200 frame numbers of vtest.avi (0-based)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
OPSET = 17

# Every op the dynaspa runtime loads (README.md "What loads"); exported graphs must stay inside.
ALLOWED_OPS = set("""Conv ConvTranspose BatchNormalization Relu LeakyRelu Clip Sigmoid HardSigmoid
HardSwish Tanh Erf Gelu Exp Sqrt Pow Neg Abs Add Sub Mul Div MatMul Gemm Softmax LayerNormalization
InstanceNormalization GroupNormalization MaxPool AveragePool GlobalAveragePool ReduceMean ReduceSum
ReduceMax Reshape Flatten Transpose Concat Slice Split Gather Squeeze Unsqueeze Expand Shape Constant
ConstantOfShape Identity Cast Resize Pad Greater Less Equal Not And Where CumSum""".split())


# ----------------------------------------------------------------------------------------------
# Frames
# ----------------------------------------------------------------------------------------------
def frame_path(k):
    return os.path.join(FRAMES, "vtest", f"vtest_{k:03d}.jpg")


def vtest_paths():
    return [frame_path(k) for k in VTEST_FRAMES]


def photo_paths():
    """Still photos: opencv-doc samples (photos_cv/) and scikit-image samples (photos/)."""
    return sorted(glob.glob(os.path.join(FRAMES, "photos_cv", "*.jpg"))) + \
        sorted(glob.glob(os.path.join(FRAMES, "photos", "*.png")))


def load_u8(path):
    return np.asarray(Image.open(path).convert("RGB"), dtype=np.uint8)


def resize_u8(arr, w, h):
    return np.asarray(Image.fromarray(arr, "RGB").resize((w, h), Image.BILINEAR), dtype=np.uint8)


def load_rgb(path_or_arr, w, h):
    """An image (path or HxWx3 uint8) -> Pillow bilinear resize to w x h -> float32 [0,1] HxWx3."""
    arr = path_or_arr if isinstance(path_or_arr, np.ndarray) else load_u8(path_or_arr)
    if arr.shape[:2] != (h, w):
        arr = resize_u8(arr, w, h)
    return arr.astype(np.float32) / 255.0


def to_input(imgs, mean, std):
    """List of HxWx3 [0,1] float images -> normalised NCHW float32 batch."""
    x = np.stack(imgs).astype(np.float32)
    x = (x - np.array(mean, np.float32)) / np.array(std, np.float32)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2)).astype(np.float32)


_BG = None


def vtest_background():
    """Median of the 200 committed vtest frames: the empty scene (uint8 HxWx3)."""
    global _BG
    if _BG is None:
        stack = np.stack([load_u8(p) for p in vtest_paths()])
        _BG = np.median(stack, axis=0).astype(np.uint8)
    return _BG


# ----------------------------------------------------------------------------------------------
# Saliency: the content signal the mask units are fitted to
# ----------------------------------------------------------------------------------------------
def saliency(img):
    """Centre-surround contrast energy of an HxWx3 [0,1] image (Itti-style, one scale pair):
    sum over a luminance and two colour-opponent channels of |G(s1)*c - G(s2)*c|, smoothed.
    Scales are relative to the image width (s1 = w/224, s2 = 8 w/224 pixels)."""
    from scipy.ndimage import gaussian_filter
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    chans = [(r + g + b) / 3.0, r - g, (r + g) / 2.0 - b]
    s1 = img.shape[1] / 224.0
    e = np.zeros(img.shape[:2], np.float64)
    for c in chans:
        e += np.abs(gaussian_filter(c, s1) - gaussian_filter(c, 8 * s1))
    return gaussian_filter(e, 2 * s1)


def area_resize(m, h, w):
    """Area-average a 2-D map to h x w (Pillow BOX filter on float32)."""
    return np.asarray(Image.fromarray(m.astype(np.float32), "F").resize((w, h), Image.BOX),
                      dtype=np.float32)


# ----------------------------------------------------------------------------------------------
# Image edits (SIGE): person cut-outs by background subtraction, paste / move / recolour
# ----------------------------------------------------------------------------------------------
def person_cutouts(img, bg, thr=40, min_area=30):
    """Foreground blobs of a vtest frame: |img - median background| summed over channels > thr,
    opened/closed, connected components of at least min_area pixels. Returns dicts with
    'mask' (bool HxW, the blob), 'bbox' (y0, x0, y1, x1) and 'area'."""
    from scipy import ndimage
    d = np.abs(img.astype(int) - bg.astype(int)).sum(-1) > thr
    d = ndimage.binary_closing(ndimage.binary_opening(d, iterations=1), iterations=2)
    lab, n = ndimage.label(d)
    out = []
    for i, sl in enumerate(ndimage.find_objects(lab), start=1):
        m = lab == i
        a = int(m.sum())
        if a >= min_area:
            out.append({"mask": m, "bbox": (sl[0].start, sl[1].start, sl[0].stop, sl[1].stop),
                        "area": a})
    return out


def _soft(mask, r=1.0):
    from scipy.ndimage import gaussian_filter
    return np.clip(gaussian_filter(mask.astype(np.float32), r) * 1.5, 0, 1) if r > 0 else \
        mask.astype(np.float32)


def paste_cutout(dst, src, cut, dy, dx, scale=1.0):
    """Paste the blob `cut` of src into dst, shifted by (dy, dx) and scaled about its bbox
    bottom centre (feet stay on the ground)."""
    y0, x0, y1, x1 = cut["bbox"]
    patch = src[y0:y1, x0:x1]
    m = cut["mask"][y0:y1, x0:x1].astype(np.float32)
    h, w = y1 - y0, x1 - x0
    nh, nw = max(1, int(round(h * scale))), max(1, int(round(w * scale)))
    patch = np.asarray(Image.fromarray(patch).resize((nw, nh), Image.BILINEAR), np.float32)
    m = np.asarray(Image.fromarray(m, "F").resize((nw, nh), Image.BILINEAR), np.float32)
    m = _soft(m > 0.5, 0.7)
    by, bx = y1 + dy, (x0 + x1) // 2 + dx          # new bottom centre
    ty, tx = by - nh, bx - nw // 2
    out = dst.astype(np.float32).copy()
    H, W = dst.shape[:2]
    ys, xs = max(0, ty), max(0, tx)
    ye, xe = min(H, ty + nh), min(W, tx + nw)
    if ye <= ys or xe <= xs:
        return dst.copy()
    pm = m[ys - ty:ye - ty, xs - tx:xe - tx, None]
    out[ys:ye, xs:xe] = pm * patch[ys - ty:ye - ty, xs - tx:xe - tx] + (1 - pm) * out[ys:ye, xs:xe]
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


def remove_cutout(img, bg, cut, grow=2):
    """Replace the blob (grown by `grow` px) with the background."""
    from scipy.ndimage import binary_dilation
    m = _soft(binary_dilation(cut["mask"], iterations=grow), 0.7)[..., None]
    out = m * bg.astype(np.float32) + (1 - m) * img.astype(np.float32)
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


def _rgb_to_hsv(a):
    """Vectorised colorsys.rgb_to_hsv (h, s, v in [0, 1])."""
    r, g, b = a[..., 0], a[..., 1], a[..., 2]
    mx, mn = a.max(-1), a.min(-1)
    d = mx - mn
    h = np.zeros_like(mx)
    nz = d > 1e-6
    rc = np.where(nz, (mx - r) / np.where(nz, d, 1), 0)
    gc = np.where(nz, (mx - g) / np.where(nz, d, 1), 0)
    bc = np.where(nz, (mx - b) / np.where(nz, d, 1), 0)
    h = np.where(r == mx, bc - gc, np.where(g == mx, 2.0 + rc - bc, 4.0 + gc - rc))
    h = np.where(nz, (h / 6.0) % 1.0, 0.0)
    s = np.where(mx > 0, d / np.where(mx > 0, mx, 1), 0)
    return h, s, mx


def _hsv_to_rgb(h, s, v):
    i = np.floor(h * 6.0).astype(int) % 6
    f = h * 6.0 - np.floor(h * 6.0)
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    sel = [np.stack(c, -1) for c in ((v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q))]
    out = np.zeros(h.shape + (3,))
    for k in range(6):
        out = np.where((i == k)[..., None], sel[k], out)
    return out


def recolour_largest(img, hue_lo, hue_hi, shift, min_sat=0.35):
    """Hue-rotate the largest connected region whose hue lies in [hue_lo, hue_hi] (wrapping)."""
    from scipy import ndimage
    a = img.astype(np.float64) / 255.0
    h, s, v = _rgb_to_hsv(a)
    inr = (h >= hue_lo) | (h <= hue_hi) if hue_lo > hue_hi else (h >= hue_lo) & (h <= hue_hi)
    m = inr & (s > min_sat) & (v > 0.15)
    m = ndimage.binary_closing(ndimage.binary_opening(m, iterations=1), iterations=2)
    lab, n = ndimage.label(m)
    sizes = ndimage.sum(m, lab, range(1, n + 1))
    m = lab == (1 + int(np.argmax(sizes)))
    m = ndimage.binary_fill_holes(m)
    rgb = _hsv_to_rgb((h + shift) % 1.0, s, v)
    w = _soft(m, 0.7)[..., None]
    out = w * rgb + (1 - w) * a
    return np.clip(np.round(out * 255), 0, 255).astype(np.uint8)


def ellipse(h, w, cy, cx, ry, rx):
    yy, xx = np.mgrid[0:h, 0:w]
    return ((yy - cy) / max(ry, 1e-6)) ** 2 + ((xx - cx) / max(rx, 1e-6)) ** 2 <= 1.0


def paste_ellipse(dst, src, cy, cx, ry, rx, oy, ox, soft=3.0):
    """Paste the ellipse (centre cy, cx; radii ry, rx) of src into dst, the ellipse's bounding
    box's top-left corner at (oy, ox) in dst; soft edge."""
    H, W = dst.shape[:2]
    m = _soft(ellipse(src.shape[0], src.shape[1], cy, cx, ry, rx), soft / 3.0)
    y0, x0 = int(cy - ry), int(cx - rx)
    y1, x1 = int(cy + ry) + 1, int(cx + rx) + 1
    out = dst.astype(np.float32).copy()
    ph, pw = y1 - y0, x1 - x0
    ty, tx = oy, ox
    ye, xe = min(H, ty + ph), min(W, tx + pw)
    pm = m[y0:y0 + ye - ty, x0:x0 + xe - tx, None]
    out[ty:ye, tx:xe] = pm * src[y0:y0 + ye - ty, x0:x0 + xe - tx] + (1 - pm) * out[ty:ye, tx:xe]
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


# ----------------------------------------------------------------------------------------------
# ONNX export and checks
# ----------------------------------------------------------------------------------------------
def export(module, args, path, input_names, output_names, props, doc):
    """torch.onnx.export (TorchScript exporter, opset 17, symbolic batch), metadata, checks:
    only ops the runtime supports, onnx.checker full_check, LayerNormalization single output."""
    import warnings

    import onnx
    import torch
    dyn = {n: {0: "batch"} for n in list(input_names) + list(output_names)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, path, opset_version=OPSET, dynamo=False,
                          input_names=list(input_names), output_names=list(output_names),
                          dynamic_axes=dyn, do_constant_folding=True)
    m = onnx.load(path)
    # Static output shapes (the exporter leaves some symbolic): measured with ONNX Runtime.
    feeds = {n: a.detach().numpy() for n, a in zip(input_names, args)}
    res = ort_session(path).run(list(output_names), feeds)
    for vi, r in zip(m.graph.output, res):
        del vi.type.tensor_type.shape.dim[:]
        for i, d in enumerate(r.shape):
            dim = vi.type.tensor_type.shape.dim.add()
            if i == 0:
                dim.dim_param = "batch"
            else:
                dim.dim_value = d
    m.doc_string = doc
    m.producer_name = "dynaspa-models"
    del m.metadata_props[:]
    onnx.helper.set_model_props(m, {k: str(v) for k, v in props.items()})
    check_graph(m, os.path.basename(path))
    onnx.save(m, path)
    return m


def check_graph(m, name):
    import onnx
    ops = {n.op_type for n in m.graph.node}
    bad = sorted(ops - ALLOWED_OPS)
    if bad:
        raise RuntimeError(f"{name}: ops the runtime does not support: {bad}")
    if any(o.domain not in ("", "ai.onnx") for o in m.opset_import):
        raise RuntimeError(f"{name}: custom opset domains {[o.domain for o in m.opset_import]}")
    if [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")] != [OPSET]:
        raise RuntimeError(f"{name}: opset {m.opset_import}")
    for n in m.graph.node:
        if n.domain not in ("", "ai.onnx"):
            raise RuntimeError(f"{name}: node {n.name} in domain {n.domain}")
        if n.op_type == "LayerNormalization" and len([o for o in n.output if o]) != 1:
            raise RuntimeError(f"{name}: {n.name} uses LayerNormalization's extra outputs")
        if n.op_type == "Resize":
            mode = [a.s.decode() for a in n.attribute if a.name == "mode"]
            if mode and mode[0] not in ("nearest", "linear"):
                raise RuntimeError(f"{name}: {n.name} Resize mode {mode}")
    onnx.checker.check_model(m, full_check=True)
    for vi in list(m.graph.input) + list(m.graph.output):
        dims = vi.type.tensor_type.shape.dim
        for d in dims[1:]:
            if not d.HasField("dim_value"):
                raise RuntimeError(f"{name}: {vi.name} has a symbolic non-batch dimension")
    return sorted(ops)


def op_set(path):
    import onnx
    m = onnx.load(path, load_external_data=False)
    return sorted({n.op_type for n in m.graph.node})


def ort_session(model_or_path, extra_outputs=(), optimize=False):
    import onnx
    import onnxruntime as ort
    if extra_outputs:
        m = onnx.load(model_or_path) if isinstance(model_or_path, str) else model_or_path
        mm = onnx.ModelProto()
        mm.CopyFrom(m)
        for name in extra_outputs:
            mm.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
        src = mm.SerializeToString()
    else:
        src = model_or_path if isinstance(model_or_path, str) else model_or_path.SerializeToString()
    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    so.log_severity_level = 3
    return ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


# ----------------------------------------------------------------------------------------------
# Mask statistics
# ----------------------------------------------------------------------------------------------
def mask_stats(masks):
    """masks: bool [F, H, W] of one op over F frames. Mean density, its std over frames, and the
    mean 4-connected component size in cells (active cells / components, pooled over frames)."""
    from scipy import ndimage
    masks = np.asarray(masks, bool)
    dens = masks.reshape(len(masks), -1).mean(1)
    n_comp = 0
    for m in masks:
        n_comp += ndimage.label(m)[1]
    active = int(masks.sum())
    return {"density": float(dens.mean()), "density_std": float(dens.std()),
            "density_min": float(dens.min()), "density_max": float(dens.max()),
            "mean_component_cells": float(active / n_comp) if n_comp else 0.0,
            "components_per_frame": float(n_comp / len(masks)),
            "shape": list(masks.shape[1:])}


def stats_table(rows, title):
    """Markdown table from [(layer, stats)]."""
    out = [f"**{title}**", "", "| sparse op (mask) | H x W | density | std over frames | min-max | "
           "mean component (cells) | components/frame |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, s in rows:
        h, w = s["shape"]
        out.append(f"| `{name}` | {h} x {w} | {s['density']:.3f} | {s['density_std']:.3f} | "
                   f"{s['density_min']:.2f}-{s['density_max']:.2f} | {s['mean_component_cells']:.1f} | "
                   f"{s['components_per_frame']:.1f} |")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------------
# Mask dataset writer (models/masks/FORMAT.md)
# ----------------------------------------------------------------------------------------------
MAGIC = b"DSPAMASK"
VERSION = 1


def write_mask_dataset(path, meta, maps, ops, frames):
    """maps: [(name, h, w, prefix)]; ops: [(op_name, map_index, reduce, dilate)];
    frames: list (per frame) of lists (per map) of bool [h, w] arrays."""
    body = bytearray()
    meta_b = json.dumps(meta, sort_keys=True).encode()
    body += MAGIC + struct.pack("<IIIII", VERSION, len(frames), len(maps), len(ops), len(meta_b))
    body += meta_b
    for name, h, w, prefix in maps:
        nb = name.encode()
        body += struct.pack("<H", len(nb)) + nb + struct.pack("<III", h, w, prefix)
    for name, mi, red, dil in ops:
        nb = name.encode()
        h, w = maps[mi][1], maps[mi][2]
        assert h % red == 0 and w % red == 0 and dil % 2 == 1, (name, h, w, red, dil)
        body += struct.pack("<H", len(nb)) + nb + struct.pack("<IHHII", mi, red, dil, h // red, w // red)
    for per_map in frames:
        assert len(per_map) == len(maps)
        for (name, h, w, _), m in zip(maps, per_map):
            m = np.asarray(m, bool)
            assert m.shape == (h, w), (name, m.shape, h, w)
            body += np.packbits(m.reshape(-1), bitorder="little").tobytes()
    body += struct.pack("<I", zlib.crc32(bytes(body)) & 0xFFFFFFFF)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(bytes(body))
    return len(body)


def read_mask_dataset(path):
    """Python reader (the reference for the Rust loader); returns meta, maps, ops, frames."""
    data = open(path, "rb").read()
    assert data[:8] == MAGIC
    assert zlib.crc32(data[:-4]) & 0xFFFFFFFF == struct.unpack("<I", data[-4:])[0], "CRC mismatch"
    ver, nf, nm, no, ml = struct.unpack_from("<IIIII", data, 8)
    p = 28
    meta = json.loads(data[p:p + ml])
    p += ml
    maps, ops = [], []
    for _ in range(nm):
        (n,) = struct.unpack_from("<H", data, p)
        name = data[p + 2:p + 2 + n].decode()
        p += 2 + n
        h, w, pre = struct.unpack_from("<III", data, p)
        p += 12
        maps.append((name, h, w, pre))
    for _ in range(no):
        (n,) = struct.unpack_from("<H", data, p)
        name = data[p + 2:p + 2 + n].decode()
        p += 2 + n
        mi, red, dil, oh, ow = struct.unpack_from("<IHHII", data, p)
        p += 16
        ops.append((name, mi, red, dil))
    frames = []
    for _ in range(nf):
        per = []
        for _, h, w, _ in maps:
            nb = (h * w + 7) // 8
            per.append(np.unpackbits(np.frombuffer(data[p:p + nb], np.uint8), bitorder="little")[:h * w]
                       .reshape(h, w).astype(bool))
            p += nb
        frames.append(per)
    assert p == len(data) - 4
    return meta, maps, ops, frames


def op_mask(m, reduce, dilate):
    """The mask an op sees: max-pool by `reduce` (k = stride = reduce), then a dilate x dilate
    max filter (stride 1, zero padding)."""
    from scipy.ndimage import maximum_filter
    m = np.asarray(m, bool)
    if reduce > 1:
        h, w = m.shape
        m = m.reshape(h // reduce, reduce, w // reduce, reduce).any(axis=(1, 3))
    if dilate > 1:
        m = maximum_filter(m, size=dilate, mode="constant", cval=False)
    return m



def family_main(doc, configs, build):
    """The command line every family exporter shares: sizes, density, output folder."""
    import argparse
    import torch
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--density", type=float, default=0.3)
    ap.add_argument("--sizes", nargs="+", default=["small", "full"], choices=sorted(configs))
    ap.add_argument("--out", default=os.path.join(ROOT, "models"))
    ap.add_argument("--no-dataset", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    for size in args.sizes:
        build(size, args.density, args.out, dataset=not args.no_dataset)
    return 0


def init_conv_bn(mod, g):
    """He-initialises a Conv2d (bias zero) or gives a BatchNorm2d an affine near identity, drawing
    from generator `g`; returns whether `mod` was one of them."""
    import torch
    import torch.nn as nn
    if isinstance(mod, nn.Conv2d):
        fan_in = mod.in_channels // mod.groups * mod.kernel_size[0] * mod.kernel_size[1]
        mod.weight.data = torch.randn(mod.weight.shape, generator=g) * np.sqrt(2.0 / fan_in)
        if mod.bias is not None:
            mod.bias.data.zero_()
        return True
    if isinstance(mod, nn.BatchNorm2d):
        mod.weight.data = torch.empty(mod.num_features).uniform_(0.7, 1.3, generator=g)
        mod.bias.data = torch.randn(mod.num_features, generator=g) * 0.15 - 0.05
        return True
    return False
