#!/bin/bash
# Session 7 call H: after the split-K finish change (FC channels per work-item) and KS = 32 in
# the GEMM space: the issue-5 GEMM ops at batch 1 with sampled schedules on CUDA against
# PyTorch (with each launch of the fastest member timed alone), NVIDIA OpenCL against our
# dense OpenCL kernel; then the tuner's experiments on the full-size DynConv (exported here).
source "$(dirname "$0")/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/masks /tmp/full
( timeout 200 python3 models/dynconv.py --sizes full --no-dataset --out /tmp/full > /tmp/full/export.log 2>&1; touch /tmp/full/done ) &
echo "== CUDA, GEMM ops b1 with sampled schedules"
timeout 200 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs ${KNOBS:-36} --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
  --dump-masks /tmp/masks --json $OUT/ops_knobs.jsonl 2>&1 | grep -v "^\s*$" | tail -40
timeout 60 python3 benches/gpu_baselines.py --masks /tmp/masks --batches 1 --runs 100 --json /tmp/torch_ops.jsonl > /dev/null 2> $OUT/torch_ops.err; echo "torch rc=$?"
python3 benches/gpu_vs_torch.py $OUT/ops_knobs.jsonl /tmp/torch_ops.jsonl | tee $OUT/vs_torch.txt
date -u
echo "== NVIDIA OpenCL, GEMM ops b1 with sampled schedules"
timeout 120 $D/gpu_sparse_bench --backend opencl --device NVIDIA --batches 1 --only conv --knobs ${KNOBS_CL:-20} --densities 0.1,0.3,0.5 \
  --samples 10 --runs 10 --json $OUT/ops_knobs_cl.jsonl 2>&1 | grep -v "^\s*$" | tail -30
date -u
while [ ! -f /tmp/full/done ]; do sleep 2; done; ls /tmp/full; tail -2 /tmp/full/export.log
echo "== tuner experiments, full-size DynConv on CUDA"
timeout ${TX_TIMEOUT:-250} $D/tune_experiments_gpu /tmp/full/dynconv_full_d30.onnx models/masks/dynconv_full_d30.dsm cuda ${TX_ARGS:-4 100 3 16 4} 2>&1 | grep -v "^\s*$" | tee $OUT/tx_full.txt | tail -40
date -u
