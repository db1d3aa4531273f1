#!/bin/bash
# Session 11 call AB: the reduced models re-tuned on CUDA with KS 32 in the tuner's domain
# (scripts/tune_gpu_device.sh cuda, dynaspa of this session), then the shipped profile against
# the new one and the default (calibrated) PolyKernels, alternated, `dynaspa bench`.
DIST=dist-s11 D=/tmp/d11
source "$(dirname "$0")/../device_s7/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u
DYNASPA=$D/dynaspa OUT=$OUT/tune SEARCH_S=40 timeout 450 bash scripts/tune_gpu_device.sh cuda 2>&1 | grep -vE "^\s*$" | tail -60
new=$OUT/tune/profiles/cuda-nvidia-h100-80gb-hbm3
for rep in 1 2; do
  for m in dynconv_small_d30 sige_small avit_small_d30; do
    extra=(); [ $m = sige_small ] && extra=(--input mask=tests/goldens/sige_small/mask_0.npy)
    for p in none profiles/cuda-nvidia-h100-80gb-hbm3/$m.json $new/$m.json; do
      pa=(); [ $p != none ] && pa=(--profile $p)
      echo "-- [$rep] $m profile=$p: $(timeout 40 $D/dynaspa bench models/$m.onnx --frames models/frames/vtest --max-frames 30 --rounds 5 --backend cuda "${extra[@]}" "${pa[@]}" 2>&1 | grep -E "median|speedup|error|refus" | tr '\n' ' ')"
    done
  done
done
date -u
