"""Mean mask density of the committed DynConv / A-ViT exports on the 200 committed vtest frames,
measured with ONNX Runtime on the masks inside the graphs (calib.mask_values): DynConv's hard
masks (GreaterOrEqual), A-ViT's running masks (Less; patch tokens only, blocks 1-11).

  python3 models/authors/density.py [model ...]
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calib  # noqa: E402
from calib import common  # noqa: E402

MODELS = {"dynconv_resnet50_w025": 224, "dynconv_resnet18_w025": 224, "dynconv_hourglass_f48": 128,
          "avit_act_e96": 224}


def main():
    import onnx
    for name in sys.argv[1:] or list(MODELS):
        path = os.path.join(calib.HERE, f"{name}.onnx")
        m = onnx.load(path)
        run = [t for t in calib.mask_values(m) if t[4] in ("GreaterOrEqual", "Less")]
        outs = [o.name for o in m.graph.output]
        size = MODELS[name]
        per_frame = []
        for p in common.vtest_paths():
            x = common.to_input([common.load_rgb(p, size, size)], common.IMAGENET_MEAN, common.IMAGENET_STD)
            res = calib.ort_run(path, {"input": x}, outs, [t[3] for t in run])[len(outs):]
            if name.startswith("avit"):
                res = [r[:, 1:] for r in res[:11]]        # masks for blocks 1..11, patch tokens
            per_frame.append([float(np.mean(r)) for r in res])
        d = np.array(per_frame)
        print(f"{name}: {len(run)} masks, mean density over 200 vtest frames {d.mean():.3f} "
              f"(per frame {d.mean(1).min():.3f}-{d.mean(1).max():.3f}; per mask {d.mean(0).min():.3f}-"
              f"{d.mean(0).max():.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
