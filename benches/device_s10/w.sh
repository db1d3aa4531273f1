#!/bin/bash
# Session 10 call W: what the lagged dispatch adds, split into the mask launch in front of the
# member and the counts copy + host work (gpu_sparse_bench's new line), CUDA and NVIDIA OpenCL.
DIST=dist-s10 D=/tmp/d10
source "$(dirname "$0")/../device_s7/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u
for be in cuda opencl; do
  for rep in 1 2; do
    echo "== $be rep $rep"
    timeout 120 $D/gpu_sparse_bench --backend $be $([ $be = opencl ] && echo --device NVIDIA) --batches 1 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      --json $OUT/${be}_$rep.jsonl 2>&1 | grep -E "^conv|launches|^    tiles|of the lagged" | head -50
  done
done
date -u
