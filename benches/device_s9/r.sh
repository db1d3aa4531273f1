#!/bin/bash
# Session 9 call R: full-size A-ViT (DeiT-S 224, density 0.3) on CUDA end to end: the default
# (calibrated) token PolyKernels, every projection forced onto its token tile (the GPU's
# behaviour before this session), a tuned profile, each against our dense build (`bench`), and
# PyTorch eager with cuDNN in the same call.
source "$(dirname "$0")/../device_s7/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/full
[ -f /tmp/full/avit_full_d30.onnx ] || timeout 200 python3 models/avit.py --sizes full --no-dataset --out /tmp/full > /tmp/full/export.log 2>&1
ls -la /tmp/full/*.onnx
M=/tmp/full/avit_full_d30.onnx
b() { env "$@" timeout 90 $D/dynaspa bench $M --frames models/frames/vtest --max-frames 20 --rounds 5 --backend cuda ${PROFILE:+--profile $PROFILE} 2>/tmp/b.err \
      | grep -E "median|speedup_vs_dense" | tr '\n' ' '; grep -iE "error|ignoring" /tmp/b.err | head -2; echo; }
echo "default:  $(b X=1)"
echo "tokens:   $(b DYNASPA_FORCE_MEMBER=1x1)"
timeout 200 $D/dynaspa tune $M --masks models/masks --backend cuda --trials 6 --time-budget 90 -o /tmp/ptune/avit_full_d30.json > $OUT/tune_full.txt 2> /tmp/tune.err
echo "tune rc=$?"; tail -3 $OUT/tune_full.txt; grep -v "^tune \[" /tmp/tune.err | tail -2
cp /tmp/ptune/avit_full_d30.json $OUT/ 2>/dev/null
echo "profile:  $(PROFILE=/tmp/ptune/avit_full_d30.json b X=1)"
echo "default:  $(b X=1)"
echo "profile:  $(PROFILE=/tmp/ptune/avit_full_d30.json b X=1)"
timeout 120 python3 benches/gpu_baselines.py --models --runs 50 2>/dev/null | grep avit
timeout 60 python3 benches/gpu_baselines.py --models --runs 50 2>/dev/null | grep avit
date -u
