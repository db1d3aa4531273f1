#!/bin/bash
# Session 12 call AE (not run in session 12): the hand-picked KS 32 tiles with and without
# SELF_LIST (issue 5's density 0.1), NVIDIA OpenCL on and off (issue 6), and the full-size
# DynConv end to end on and off.
DIST=dist-s12 D=/tmp/d12
source "$(dirname "$0")/../device_s7/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/full
( timeout 200 python3 models/dynconv.py --sizes full --no-dataset --out /tmp/full > /tmp/full/export.log 2>&1; touch /tmp/full/done ) &
for sl in 1 0; do
  echo "== CUDA knobs, DYNASPA_SELF_LIST=$sl"
  DYNASPA_SELF_LIST=$sl timeout 120 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv3x3 --knobs 8 --densities 0.1,0.3 --samples 15 --runs 10 \
    --json $OUT/knobs_sl$sl.jsonl 2>&1 | grep -E "^conv|^    |WRONG" | head -30
done
for sl in 1 0; do
  echo "== NVIDIA OpenCL, DYNASPA_SELF_LIST=$sl"
  DYNASPA_SELF_LIST=$sl timeout 100 $D/gpu_sparse_bench --backend opencl --device NVIDIA --batches 1 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
    --json $OUT/opencl_sl$sl.jsonl 2>&1 | grep -E "^conv|^    |WRONG" | head -40
done
while [ ! -f /tmp/full/done ]; do sleep 2; done; tail -1 /tmp/full/export.log
M=/tmp/full/dynconv_full_d30.onnx
for rep in 1 2; do
  for sl in 1 0; do
    echo "== [$rep] SELF_LIST=$sl full DynConv: $(DYNASPA_SELF_LIST=$sl timeout 60 $D/dynaspa bench $M --frames models/frames/vtest --max-frames 20 --rounds 5 --backend cuda 2>&1 | grep -E 'median|speedup_vs_dense' | tr '\n' ' ')"
  done
done
date -u
