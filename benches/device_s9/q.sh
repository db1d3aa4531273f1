#!/bin/bash
# Session 9 call Q: the reduced families tuned on CUDA and on NVIDIA's OpenCL (the shipped H100
# profiles, A-ViT's for the first time), then reduced A-ViT end to end on both backends: the
# default (calibrated) token PolyKernels, the tuned profile, every projection forced onto its
# token tile (what the GPU ran before this session), against our dense build (`bench`'s own).
source "$(dirname "$0")/../device_s7/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for be in cuda opencl; do
  DYNASPA=$D/dynaspa OUT=/tmp/tune MODELS="${MODELS:-avit_small_d30 dynconv_small_d30 sige_small}" timeout 270 bash scripts/tune_gpu_device.sh $be \
    | grep -E "^==|^all ops|^-- exit|profile written" 
done
tar -C /tmp/tune -cf $OUT/profiles.tar profiles
dev() { [ "$1" = opencl ] && echo "--device NVIDIA"; }
for be in cuda opencl; do
  P=$(ls -d /tmp/tune/profiles/$be-*/ | head -1)
  for mode in default profile tokens; do
    extra=(); envs=()
    [ $mode = profile ] && extra=(--profile ${P}avit_small_d30.json)
    [ $mode = tokens ] && envs=(DYNASPA_FORCE_MEMBER=1x1)
    for rep in 1 2; do
      r=$(env "${envs[@]}" timeout 60 $D/dynaspa bench models/avit_small_d30.onnx --frames models/frames/vtest --max-frames 30 --rounds 5 \
          --backend $be $(dev $be) "${extra[@]}" 2>/tmp/bench.err | grep -E "median|speedup_vs_dense" | tr '\n' ' ')
      echo "avit_small $be $mode rep $rep: $r"; grep -iE "error|ignoring|warn" /tmp/bench.err | head -2
    done
  done
done
date -u
