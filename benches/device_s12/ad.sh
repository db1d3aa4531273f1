#!/bin/bash
# Session 12 call AD (not run in session 12: no GPU was lent): 1x1 members that list their own
# columns (SELF_LIST), with the bitmask launch beside them on the second stream, against the
# same binary with DYNASPA_SELF_LIST=0 (the mask launch in front), alternated twice, on CUDA
# at batch 1; then PyTorch/cuDNN on the same masks. Issue 5's overhead at density 0.3 is
# "lagged" of the on runs minus "alone" of the off runs (the member without the prologue).
DIST=dist-s12 D=/tmp/d12
source "$(dirname "$0")/../device_s7/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/masks
for sl in 1 0; do
  DYNASPA_SELF_LIST=$sl DYNASPA_REQUIRE_BACKENDS=cudnn timeout 100 $D/cuda_selfcheck --repo . > $OUT/selfcheck_sl$sl.txt 2>&1; echo "selfcheck SELF_LIST=$sl rc=$?"
  grep -v "^PASS" $OUT/selfcheck_sl$sl.txt | cut -c1-300 | tail -8; echo "PASS lines: $(grep -c '^PASS' $OUT/selfcheck_sl$sl.txt)"
done
for rep in 1 2; do
  for sl in 1 0; do
    echo "== [$rep] CUDA, DYNASPA_SELF_LIST=$sl"
    DYNASPA_SELF_LIST=$sl timeout 110 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      $([ $rep = 1 ] && [ $sl = 1 ] && echo --dump-masks /tmp/masks) --json $OUT/cuda_sl${sl}_$rep.jsonl 2>&1 | grep -E "^conv|^    |WRONG" | head -40
  done
done
timeout 90 python3 benches/gpu_baselines.py --masks /tmp/masks --batches 1 --runs 100 --json /tmp/torch_ops.jsonl > /dev/null 2> $OUT/torch_ops.err; echo "torch rc=$?"
cp /tmp/torch_ops.jsonl $OUT/torch_ops.jsonl.txt
python3 benches/gpu_vs_torch.py $OUT/cuda_sl1_1.jsonl /tmp/torch_ops.jsonl | tee $OUT/vs_torch.txt
date -u
