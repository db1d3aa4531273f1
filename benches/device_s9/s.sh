#!/bin/bash
# Session 9 call S: full-size A-ViT on CUDA with calibration's new token tile (16 x 16 on GPUs),
# no profile, against our dense build; the cache is emptied first so calibration runs.
source "$(dirname "$0")/../device_s7/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
rm -rf $DYNASPA_CACHE_DIR
mkdir -p /tmp/full
[ -f /tmp/full/avit_full_d30.onnx ] || timeout 200 python3 models/avit.py --sizes full --no-dataset --out /tmp/full > /tmp/full/export.log 2>&1
M=/tmp/full/avit_full_d30.onnx
for rep in 1 2 3; do
  echo "default rep $rep: $(timeout 120 $D/dynaspa bench $M --frames models/frames/vtest --max-frames 20 --rounds 5 --backend cuda 2>/tmp/b.err | grep -E "median|speedup_vs_dense" | tr '\n' ' ')"
  grep -iE "error" /tmp/b.err | head -2
done
for be in cuda opencl; do
  echo "avit_small $be default: $(timeout 60 $D/dynaspa bench models/avit_small_d30.onnx --frames models/frames/vtest --max-frames 30 --rounds 5 --backend $be $([ $be = opencl ] && echo --device NVIDIA) 2>/dev/null | grep -E "median|speedup_vs_dense" | tr '\n' ' ')"
done
mkdir -p /work && { [ -e /work/main ] || ln -s "$PWD" /work/main; }
DYNASPA_REQUIRE_BACKENDS=cuda,opencl timeout 150 $D/gpu_tokens --test-threads 1 2>&1 | grep -E "test result|panicked"
date -u
