#!/bin/bash
# Session 10 call T: (1) ncu on the sparse conv3x3's kernels at density 0.1 (where the time of
# the bitmask, GEMM and finish launches goes); (2) the issue-5 GEMM ops at batch 1 on CUDA with
# the hand-picked tiles now also at KS 32, against PyTorch in the same call; (3) the same ops on
# NVIDIA OpenCL against our dense OpenCL kernel.
DIST=dist-s10 D=/tmp/d10
source "$(dirname "$0")/../device_s7/common.sh"
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
if [ -n "$NCU" ]; then
  timeout 150 $NCU --clock-control none --target-processes all -k regex:'sconv_gemm|sconv_finish|bitmask' --launch-count 12 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
    $D/gpu_sparse_bench --backend cuda --batches 1 --only conv3x3 --densities 0.1 --samples 2 --runs 1 > $OUT/ncu.txt 2>&1
  echo "ncu rc=$? lines=$(wc -l < $OUT/ncu.txt)"
fi
mkdir -p /tmp/masks
timeout 240 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs ${KNOBS:-8} --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
  --dump-masks /tmp/masks --json $OUT/ops_cuda.jsonl 2>&1 | grep -v "^\s*$" | tail -60
timeout 90 python3 benches/gpu_baselines.py --masks /tmp/masks --batches 1 --runs 100 --json /tmp/torch_ops.jsonl > /dev/null 2> $OUT/torch_ops.err; echo "torch rc=$?"
cp /tmp/torch_ops.jsonl $OUT/torch_ops.jsonl.txt
python3 benches/gpu_vs_torch.py $OUT/ops_cuda.jsonl /tmp/torch_ops.jsonl | tee $OUT/vs_torch.txt
timeout 200 $D/gpu_sparse_bench --backend opencl --device NVIDIA --batches 1 --only conv --knobs ${KNOBS:-8} --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
  --json $OUT/ops_opencl.jsonl 2>&1 | grep -v "^\s*$" | tail -60
date -u
