#!/usr/bin/env python3
"""Make the committed real frames under models/frames/ (see models/frames/README.md).

    python3 models/make_frames.py

Needs the Debian packages `opencv-doc` (for vtest.avi and the sample photos) and `ffmpeg`
(to decode vtest.avi, an MS-MPEG4v3 AVI that Pillow cannot read).

1. models/frames/vtest/vtest_NNN.jpg: 200 frames of OpenCV's vtest.avi (fixed street camera,
   768x576, 10 fps, 795 frames): frames 0, 3, 6, ..., 597 (NNN = frame number, 0-based),
   resized as a whole with Pillow bilinear to 224x168 (aspect kept), JPEG quality 85.
2. models/frames/photos_cv/<name>.jpg: eight still photos of opencv-doc's samples/data, resized
   as a whole (aspect changes slightly) to 224x168, JPEG quality 90.
3. models/frames/edits/<name>_edited.png: four SIGE edit pairs. The original is a committed JPEG
   frame from 1. or 2. (decoded by Pillow); the edited image is the original with one edit (a
   person pasted, a person moved, an object recoloured, an object pasted), saved losslessly as PNG
   so that the difference outside the edit is exactly zero. models/frames/edits/edits.json lists
   the pairs and the edit of each.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

OPENCV_DATA = "/usr/share/doc/opencv-doc/examples/data"
VTEST = os.path.join(OPENCV_DATA, "vtest.avi")
VTEST_MD5 = "d401fe2028f78dd585e2ade0a0d678c0"
PHOTOS_CV = ["fruits.jpg", "building.jpg", "butterfly.jpg", "home.jpg", "leuvenA.jpg",
             "squirrel_cls.jpg", "baboon.jpg", "smarties.png"]
SIZE = (224, 168)


def extract_vtest(out_dir):
    with open(VTEST, "rb") as f:
        md5 = hashlib.md5(f.read()).hexdigest()
    if md5 != VTEST_MD5:
        raise RuntimeError(f"{VTEST}: md5 {md5}, expected {VTEST_MD5} (opencv-doc 4.6.0+dfsg-12)")
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-i", VTEST, "-vsync", "0",
                        os.path.join(tmp, "f_%04d.png")], check=True)
        n = len(os.listdir(tmp))
        for k in common.VTEST_FRAMES:
            im = Image.open(os.path.join(tmp, f"f_{k + 1:04d}.png")).convert("RGB")
            im.resize(SIZE, Image.BILINEAR).save(os.path.join(out_dir, f"vtest_{k:03d}.jpg"),
                                                 quality=85, optimize=True)
    print(f"vtest: {n} frames decoded, {len(common.VTEST_FRAMES)} written to {out_dir}")


def photos_cv(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for name in PHOTOS_CV:
        im = Image.open(os.path.join(OPENCV_DATA, name)).convert("RGB")
        base = os.path.splitext(name)[0]
        im.resize(SIZE, Image.BILINEAR).save(os.path.join(out_dir, f"{base}.jpg"), quality=90,
                                             optimize=True)
        print(f"photo {name}: {im.size[0]}x{im.size[1]} -> {SIZE[0]}x{SIZE[1]}")


# ----------------------------------------------------------------------------------------------
# SIGE edit pairs
# ----------------------------------------------------------------------------------------------
def make_edits(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    bg = common.vtest_background()
    recs = []

    def pick(cuts, bbox):
        found = [c for c in cuts if tuple(c["bbox"]) == bbox]
        if not found:
            raise RuntimeError(f"no foreground blob with bbox {bbox}: {[c['bbox'] for c in cuts]}")
        return found[0]

    def save(name, orig_path, edited, what):
        p = os.path.join(out_dir, f"{name}_edited.png")
        Image.fromarray(edited).save(p, optimize=True)
        o = common.load_u8(orig_path)
        diff = np.abs(o.astype(int) - edited.astype(int)).max(-1) > 0
        recs.append({"name": name, "original": os.path.relpath(orig_path, common.ROOT),
                     "edited": os.path.relpath(p, common.ROOT), "edit": what,
                     "changed_pixels": float(diff.mean())})
        print(f"edit {name}: {what} ({diff.mean():.3f} of pixels changed)")

    # 1. A person pasted: the walker in the red jacket, cut out of frame 450 (background
    #    subtraction), pasted into frame 120 on the road, 1.3x larger (nearer the camera).
    dst = common.frame_path(120)
    src = common.load_u8(common.frame_path(450))
    cut = pick(common.person_cutouts(src, bg), (70, 161, 99, 174))
    ed = common.paste_cutout(common.load_u8(dst), src, cut, dy=-2, dx=-75, scale=1.3)
    save("vtest120_person_pasted", dst, ed, f"walker from frame 450 (bbox {cut['bbox']}) pasted at "
         "1.3x size, 75 px left, 2 px up")
    # 2. A person moved: in frame 450 the walker at bbox (62, 90, 86, 99) is replaced by the
    #    background and pasted 35 px to the right.
    dst = common.frame_path(450)
    img = common.load_u8(dst)
    cut = pick(common.person_cutouts(img, bg), (62, 90, 86, 99))
    ed = common.remove_cutout(img, bg, cut)
    ed = common.paste_cutout(ed, img, cut, dy=0, dx=35, scale=1.0)
    save("vtest450_person_moved", dst, ed, f"walker (bbox {cut['bbox']}) moved 35 px right, the "
         "hole filled with the median background")
    # 3. An object recoloured: the largest connected orange region of fruits.jpg (the halved
    #    orange and the fruits touching it) hue-rotated to blue-violet.
    dst = os.path.join(common.ROOT, "models/frames/photos_cv/fruits.jpg")
    img = common.load_u8(dst)
    ed = common.recolour_largest(img, hue_lo=0.03, hue_hi=0.13, shift=0.55)
    save("fruits_recoloured", dst, ed, "largest connected orange-hued region (the halved "
         "orange and the fruits touching it) hue-rotated by +0.55 (to blue-violet)")
    # 4. An object pasted: the butterfly (centre ellipse of butterfly.jpg) pasted onto
    #    building.jpg, soft-edged.
    dst = os.path.join(common.ROOT, "models/frames/photos_cv/building.jpg")
    src = common.load_u8(os.path.join(common.ROOT, "models/frames/photos_cv/butterfly.jpg"))
    ed = common.paste_ellipse(common.load_u8(dst), src, cy=84, cx=112, ry=40, rx=56, oy=70, ox=60)
    save("building_butterfly_pasted", dst, ed, "centre ellipse (80x112 px) of butterfly.jpg pasted "
         "onto building.jpg at (70, 60), 3 px soft edge")
    with open(os.path.join(out_dir, "edits.json"), "w") as f:
        json.dump(recs, f, indent=1)
        f.write("\n")


def main():
    frames = os.path.join(common.ROOT, "models", "frames")
    extract_vtest(os.path.join(frames, "vtest"))
    photos_cv(os.path.join(frames, "photos_cv"))
    make_edits(os.path.join(frames, "edits"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
