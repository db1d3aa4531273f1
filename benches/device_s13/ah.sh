#!/bin/bash
# Session 13 call AH: sparse GEMM and split-K finish grids sized for the device (column tiles
# stepped over inside the kernels) against the grid of one work-group per column tile the map
# can have (DYNASPA_SCONV_GROUPS_PER_CU=0), alternated, one binary; self-listing members never
# fuse the finish now. Correctness first (self-check, test binaries with the node suite's
# counts), then CUDA at batch 1 with sampled schedules, fused finish both ways, batches 2 and 4,
# NVIDIA OpenCL, PyTorch on the same masks, and the full-size DynConv. The binaries were those
# of the experiment (not landed: RESULTS.md, calls AH and AI); DYNASPA_SCONV_GROUPS_PER_CU
# exists only there.
FULL=1 source "$(dirname "$0")/start.sh"
source "$(dirname "$0")/correctness.sh"
mkdir -p /tmp/masks1 /tmp/masks24
for rep in 1 2; do
  for g in 4 0; do
    echo "== [$rep] b1 knobs, GROUPS_PER_CU=$g $(date -u +%T)"
    DYNASPA_SCONV_GROUPS_PER_CU=$g timeout 150 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs 12 --densities 0.1,0.3,0.5,1.0 --samples 15 --runs 10 \
      $([ $rep = 1 ] && [ $g = 4 ] && echo --dump-masks /tmp/masks1) --json $OUT/r/b1_g${g}_$rep.jsonl 2>&1 | grep -E "WRONG|cannot" | head -10
  done
done
for g in 2 8; do
  echo "== b1 knobs, GROUPS_PER_CU=$g $(date -u +%T)"
  DYNASPA_SCONV_GROUPS_PER_CU=$g timeout 150 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs 12 --densities 0.1,0.3,0.5,1.0 --samples 15 --runs 10 \
    --json $OUT/r/b1_g${g}_1.jsonl 2>&1 | grep -E "WRONG|cannot" | head -10
done
echo "== b1 fused both $(date -u +%T)"
DYNASPA_SELF_LIST=0 timeout 150 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs 12 --densities 0.1,0.3 --samples 15 --runs 10 --fused-finish both \
  --json $OUT/r/b1_fused.jsonl 2>&1 | grep -E "WRONG|^conv" | head -20
timeout 80 python3 benches/gpu_baselines.py --masks /tmp/masks1 --batches 1 --runs 100 --json $OUT/r/torch_b1.jsonl > /dev/null 2> $OUT/r/torch_b1.err; echo "torch rc=$?"
for f in b1_g4_1 b1_g0_1 b1_g4_2 b1_g0_2 b1_g2_1 b1_g8_1; do echo "-- $f"; python3 benches/gpu_vs_torch.py $OUT/r/$f.jsonl $OUT/r/torch_b1.jsonl | tee $OUT/r/vs_$f.txt; done
for g in 4 0; do
  echo "== b2,b4, GROUPS_PER_CU=$g $(date -u +%T)"
  DYNASPA_SCONV_GROUPS_PER_CU=$g timeout 120 $D/gpu_sparse_bench --backend cuda --batches 2,4 --only conv --densities 0.1,0.3,0.5,1.0 --samples 15 --runs 10 \
    $([ $g = 4 ] && echo --dump-masks /tmp/masks24) --json $OUT/r/b24_g$g.jsonl 2>&1 | grep -E "WRONG" | head -10
done
timeout 80 python3 benches/gpu_baselines.py --masks /tmp/masks24 --batches 2,4 --runs 100 --json $OUT/r/torch_b24.jsonl > /dev/null 2> $OUT/r/torch_b24.err; echo "torch b24 rc=$?"
for g in 4 0; do echo "-- b24 g$g"; python3 benches/gpu_vs_torch.py $OUT/r/b24_g$g.jsonl $OUT/r/torch_b24.jsonl | tee $OUT/r/vs_b24_g$g.txt; done
for g in 4 0; do
  echo "== NVIDIA OpenCL, GROUPS_PER_CU=$g $(date -u +%T)"
  DYNASPA_SCONV_GROUPS_PER_CU=$g timeout 100 $D/gpu_sparse_bench --backend opencl --device NVIDIA --batches 1 --only conv --knobs 12 --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
    --json $OUT/r/ocl_g$g.jsonl 2>&1 | grep -E "WRONG" | head -10
done
full_ab DYNASPA_SCONV_GROUPS_PER_CU 4 0
timeout 60 python3 benches/gpu_baselines.py --models --runs 50 > $OUT/r/torch_models.txt 2>&1; echo "torch models rc=$?"; grep -o '"model": "[a-z_]*".*"us": [0-9.]*' $OUT/r/torch_models.txt
tar -C $OUT -czf $OUT/results.tgz r && rm -rf $OUT/r
date -u
