#!/bin/bash
# Session 7 call J (binaries of fd4ed83: the split-K finish as before, a work-item per output):
# the issue-5 GEMM ops with sampled schedules at batch 1, 2 and 4 on CUDA against PyTorch, with
# each launch of the fastest member timed alone.
source "$(dirname "$0")/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/masks
timeout 330 $D/gpu_sparse_bench --backend cuda --batches ${BATCHES:-1,2,4} --only conv --knobs ${KNOBS:-36} --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
  --dump-masks /tmp/masks --json $OUT/ops_knobs.jsonl 2>&1 | grep -v "^\s*$" | tail -80
timeout 90 python3 benches/gpu_baselines.py --masks /tmp/masks --batches ${BATCHES:-1,2,4} --runs 100 --json /tmp/torch_ops.jsonl > /dev/null 2> $OUT/torch_ops.err; echo "torch rc=$?"
cp /tmp/torch_ops.jsonl $OUT/torch_ops.jsonl.txt
python3 benches/gpu_vs_torch.py $OUT/ops_knobs.jsonl /tmp/torch_ops.jsonl | tee $OUT/vs_torch.txt
date -u
