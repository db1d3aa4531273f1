#!/bin/bash
# Session 6 call B: full-size DynConv / A-ViT / SIGE on CUDA against PyTorch eager (cuDNN), same run.
source "$(dirname "$0")/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u
for f in dynconv avit sige; do
  [ -f /tmp/full/${f}_done ] || { timeout 200 python3 models/$f.py --sizes full --no-dataset --out /tmp/full > /tmp/full/export_$f.log 2>&1 && touch /tmp/full/${f}_done; }
done
ls /tmp/full
python3 - <<'P'
import numpy as np
rng = np.random.default_rng(7)
m = np.zeros((1, 1, 168, 224), np.float32)
while m.mean() < 0.3:
    cy, cx, r = rng.integers(0, 168), rng.integers(0, 224), rng.integers(8, 30)
    y, x = np.ogrid[:168, :224]
    m[0, 0][(y - cy) ** 2 + (x - cx) ** 2 < r * r] = 1
np.save("/tmp/sige_mask.npy", m); print("sige mask density", m.mean())
P
for rep in 1 2; do
  for m in dynconv_full_d30 avit_full_d30 sige_full; do
    [ -f /tmp/full/$m.onnx ] || { echo "no /tmp/full/$m.onnx"; continue; }
    extra=(); [ $m = sige_full ] && extra=(--input mask=/tmp/sige_mask.npy)
    echo "== [$rep] $m on cuda"; timeout 120 $D/dynaspa bench /tmp/full/$m.onnx --frames models/frames/vtest --max-frames 20 --rounds 5 --backend cuda "${extra[@]}" 2>&1 | tail -4
  done
  echo "== [$rep] PyTorch full models (cuDNN, eager)"
  timeout 100 python3 benches/gpu_baselines.py --models --runs 50 --json $OUT/torch_models_$rep.jsonl 2>&1 | tail -4
done
echo "== dynconv_full per step (synced)"
DYNASPA_GPU_STEP_TIMES=1 timeout 120 $D/dynaspa profile /tmp/full/dynconv_full_d30.onnx --frames models/frames/vtest --max-frames 10 --backend cuda --nodes 20 2>&1 | tail -26
date -u
