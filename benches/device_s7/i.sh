#!/bin/bash
# Session 7 call I (right after H, so /tmp/full still holds the full-size DynConv): issue 7's
# tuned profile against the default (calibrated) PolyKernels on the full-size DynConv on CUDA.
# The tune's measurement log comes back, so a cut-off tune resumes in a later call
# (carry it in dist-s7/tune/).
source "$(dirname "$0")/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u
mkdir -p /tmp/full /tmp/tune
[ -f /tmp/full/dynconv_full_d30.onnx ] || timeout 200 python3 models/dynconv.py --sizes full --no-dataset --out /tmp/full > /tmp/full/export.log 2>&1
cp dist-s7/tune/* /tmp/tune/ 2>/dev/null
P=/tmp/tune/dynconv_full_d30.json
echo "== tune (CUDA, trials ${TRIALS:-12}, budget ${BUDGET:-200} s)"
timeout ${TUNE_TIMEOUT:-330} $D/dynaspa tune /tmp/full/dynconv_full_d30.onnx --backend cuda --masks models/masks/dynconv_full_d30.dsm \
  --trials ${TRIALS:-12} --time-budget ${BUDGET:-200} -o $P 2>&1 | grep -v "^\s*$" | tail -25
echo "tune rc=${PIPESTATUS[0]}"
cp /tmp/tune/* $OUT/ 2>/dev/null
if [ -f $P ]; then
  for rep in 1 2 3; do
    for p in none $P; do
      pa=(); [ $p != none ] && pa=(--profile $p)
      echo "-- [$rep] profile=$p"
      timeout 60 $D/dynaspa bench /tmp/full/dynconv_full_d30.onnx --frames models/frames/vtest --max-frames 20 --rounds 5 --backend cuda "${pa[@]}" 2>&1 | grep -E "median|speedup|error|refus"
    done
  done
fi
date -u
