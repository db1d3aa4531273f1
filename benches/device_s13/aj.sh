#!/bin/bash
# Session 13 call AJ: the binaries that land (MMA opt-in, self-listing on for CUDA, never with
# the fused finish, grids as before): correctness on CUDA (self-check, test binaries, node
# suite) and the issue-5 convs at batch 1 with sampled schedules, MMA off and on, against
# PyTorch on the same masks; NVIDIA OpenCL at batch 1.
source "$(dirname "$0")/start.sh"
source "$(dirname "$0")/correctness.sh"
mkdir -p /tmp/masks1
for mma in 0 1; do
  echo "== b1 knobs, DYNASPA_MMA=$mma $(date -u +%T)"
  DYNASPA_MMA=$mma timeout 150 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs 12 --densities 0.1,0.3,0.5,1.0 --samples 15 --runs 10 \
    $([ $mma = 0 ] && echo --dump-masks /tmp/masks1) --json $OUT/r/b1_mma$mma.jsonl 2>&1 | grep -E "WRONG|cannot" | head -10
done
timeout 80 python3 benches/gpu_baselines.py --masks /tmp/masks1 --batches 1 --runs 100 --json $OUT/r/torch_b1.jsonl > /dev/null 2> $OUT/r/torch_b1.err; echo "torch rc=$?"
for mma in 0 1; do echo "-- MMA=$mma"; python3 benches/gpu_vs_torch.py $OUT/r/b1_mma$mma.jsonl $OUT/r/torch_b1.jsonl | tee $OUT/r/vs_b1_mma$mma.txt; done
echo "== NVIDIA OpenCL $(date -u +%T)"
timeout 100 $D/gpu_sparse_bench --backend opencl --device NVIDIA --batches 1 --only conv --knobs 12 --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
  --json $OUT/r/ocl.jsonl 2>&1 | grep -E "WRONG|^conv" | head -20
tar -C $OUT -czf $OUT/results.tgz r && rm -rf $OUT/r
date -u
