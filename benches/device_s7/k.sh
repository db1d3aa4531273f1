#!/bin/bash
# Session 7 call K (binaries of the merge of poclfix: sconv_load_stage always inlined, and the
# split-K finish with 4 channels per work-group): CUDA self-check (node suite, goldens, CUDA vs
# CPU, cuDNN), then the issue-5 GEMM ops at batch 1 with sampled schedules against PyTorch.
source "$(dirname "$0")/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/masks
DYNASPA_REQUIRE_BACKENDS=cudnn timeout 200 $D/cuda_selfcheck --repo . > $OUT/selfcheck.txt 2>&1; echo "selfcheck rc=$?"
grep -v "^PASS" $OUT/selfcheck.txt | cut -c1-300 | tail -15; echo "PASS lines: $(grep -c '^PASS' $OUT/selfcheck.txt)"
timeout 200 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs ${KNOBS:-36} --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
  --dump-masks /tmp/masks --json $OUT/ops_knobs.jsonl 2>&1 | grep -v "^\s*$" | tail -45
timeout 60 python3 benches/gpu_baselines.py --masks /tmp/masks --batches 1 --runs 100 --json /tmp/torch_ops.jsonl > /dev/null 2> $OUT/torch_ops.err; echo "torch rc=$?"
python3 benches/gpu_vs_torch.py $OUT/ops_knobs.jsonl /tmp/torch_ops.jsonl | tee $OUT/vs_torch.txt
date -u
