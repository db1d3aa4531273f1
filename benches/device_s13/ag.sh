#!/bin/bash
# Session 13 call AG: the tensor-core (MMA, 3xTF32) GEMM members against the FMA ones
# (DYNASPA_MMA=1|0, one binary), self-listing on (CUDA's new default). First correctness: the
# CUDA self-check and the GPU test binaries (node suite, sparse members, fused finish, ops,
# models) required on CUDA; then the issue-5 convs with sampled schedules at batch 1, then
# batches 2 and 4, PyTorch/cuDNN on the same masks; then the full-size DynConv, alternated.
FULL=1 source "$(dirname "$0")/start.sh"
source "$(dirname "$0")/correctness.sh"
mkdir -p /tmp/masks1 /tmp/masks24
for mma in 1 0; do
  echo "== b1 knobs, DYNASPA_MMA=$mma $(date -u +%T)"
  DYNASPA_MMA=$mma timeout 150 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs 12 --densities 0.1,0.3,0.5,1.0 --samples 15 --runs 10 \
    $([ $mma = 1 ] && echo --dump-masks /tmp/masks1) --json $OUT/r/b1_mma$mma.jsonl 2>&1 | grep -E "^conv|^    |WRONG|sampled" | head -80
done
echo "== torch b1 $(date -u +%T)"
timeout 80 python3 benches/gpu_baselines.py --masks /tmp/masks1 --batches 1 --runs 100 --json $OUT/r/torch_b1.jsonl > /dev/null 2> $OUT/r/torch_b1.err; echo "torch rc=$?"
for mma in 1 0; do python3 benches/gpu_vs_torch.py $OUT/r/b1_mma$mma.jsonl $OUT/r/torch_b1.jsonl | tee $OUT/r/vs_b1_mma$mma.txt; done
for mma in 1 0; do
  echo "== b2,b4, DYNASPA_MMA=$mma $(date -u +%T)"
  DYNASPA_MMA=$mma timeout 120 $D/gpu_sparse_bench --backend cuda --batches 2,4 --only conv --densities 0.1,0.3,0.5,1.0 --samples 15 --runs 10 \
    $([ $mma = 1 ] && echo --dump-masks /tmp/masks24) --json $OUT/r/b24_mma$mma.jsonl 2>&1 | grep -E "WRONG" | head -10
done
timeout 80 python3 benches/gpu_baselines.py --masks /tmp/masks24 --batches 2,4 --runs 100 --json $OUT/r/torch_b24.jsonl > /dev/null 2> $OUT/r/torch_b24.err; echo "torch b24 rc=$?"
for mma in 1 0; do python3 benches/gpu_vs_torch.py $OUT/r/b24_mma$mma.jsonl $OUT/r/torch_b24.jsonl | tee $OUT/r/vs_b24_mma$mma.txt; done
full_ab DYNASPA_MMA 1 0
timeout 60 python3 benches/gpu_baselines.py --models --runs 50 --only dynconv > $OUT/r/torch_models.txt 2>&1; echo "torch models rc=$?"; tail -5 $OUT/r/torch_models.txt
tar -C $OUT -czf $OUT/results.tgz r && rm -rf $OUT/r
date -u
