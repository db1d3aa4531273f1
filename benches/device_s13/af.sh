#!/bin/bash
# Session 13 call AF: session 12's calls AD and AE (never run: no GPU was lent then) in one
# call, binaries of 6cbf18f (benches/device_s12/pack.sh). SELF_LIST on and off alternated
# twice on CUDA at batch 1 (issue 5's overhead at density 0.3 = lagged of the on runs minus
# the member alone of the off runs), PyTorch/cuDNN on the same masks, then NVIDIA OpenCL on
# and off. Each step under its own timeout, most important first, so a cut leaves data.
DIST=dist-s12 D=/tmp/d12
source "$(dirname "$0")/../device_s7/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/masks
DYNASPA_SELF_LIST=1 DYNASPA_REQUIRE_BACKENDS=cudnn timeout 100 $D/cuda_selfcheck --repo . > $OUT/selfcheck_sl1.txt 2>&1; echo "selfcheck SELF_LIST=1 rc=$?"
grep -v "^PASS" $OUT/selfcheck_sl1.txt | cut -c1-300 | tail -8; echo "PASS lines: $(grep -c '^PASS' $OUT/selfcheck_sl1.txt)"
for rep in 1 2; do
  for sl in 1 0; do
    echo "== [$rep] CUDA, DYNASPA_SELF_LIST=$sl $(date -u +%T)"
    DYNASPA_SELF_LIST=$sl timeout 75 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      $([ $rep = 1 ] && [ $sl = 1 ] && echo --dump-masks /tmp/masks) --json $OUT/cuda_sl${sl}_$rep.jsonl 2>&1 | grep -E "^conv|^    |WRONG" | head -40
  done
done
echo "== torch $(date -u +%T)"
timeout 80 python3 benches/gpu_baselines.py --masks /tmp/masks --batches 1 --runs 100 --json $OUT/torch_ops.jsonl > /dev/null 2> $OUT/torch_ops.err; echo "torch rc=$?"
python3 benches/gpu_vs_torch.py $OUT/cuda_sl1_1.jsonl $OUT/torch_ops.jsonl | tee $OUT/vs_torch_sl1.txt
python3 benches/gpu_vs_torch.py $OUT/cuda_sl0_1.jsonl $OUT/torch_ops.jsonl > $OUT/vs_torch_sl0.txt
for sl in 1 0; do
  echo "== NVIDIA OpenCL, DYNASPA_SELF_LIST=$sl $(date -u +%T)"
  DYNASPA_SELF_LIST=$sl timeout 70 $D/gpu_sparse_bench --backend opencl --device NVIDIA --batches 1 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
    --json $OUT/opencl_sl$sl.jsonl 2>&1 | grep -E "^conv|^    |WRONG" | head -40
done
date -u
