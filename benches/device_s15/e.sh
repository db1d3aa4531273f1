#!/bin/bash
# Session 15 call E: call D's kernels with the split-K finish's partial sums read only for the
# frame's columns (call D read them for every column of the grid) and 1x1 members skipping the
# mask-bit load, in dist-s15; the tap table on and off in that binary (DYNASPA_TAP_TABLE) and
# call AJ's binaries (dist-s13b, c6e7963), alternated twice on the same host. Correctness of the
# new binaries first; then the issue-5 convs at batch 1 (sampled schedules) with PyTorch on the
# same masks, batches 2 and 4 and NVIDIA OpenCL at batch 1 (new, tap table on, and old), and
# the full-size DynConv end to end.
source "$(dirname "$0")/start.sh"
source "$(dirname "$0")/../device_s13/correctness.sh"
tap() { [ $1 = notab ] && echo 0 || echo 1; }
mkdir -p /tmp/masks1 /tmp/masks24
for rep in 1 2; do
  for v in new notab old; do
    echo "== [$rep] $v b1 knobs $(date -u +%T)"
    DYNASPA_TAP_TABLE=$(tap $v) timeout 150 $(bin $v)/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs 12 --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      $([ $rep = 1 ] && [ $v = new ] && echo --dump-masks /tmp/masks1) --json $OUT/r/b1_${v}_$rep.jsonl > $OUT/r/b1_${v}_$rep.txt 2>&1; echo "rc=$? wrong=$(grep -c WRONG $OUT/r/b1_${v}_$rep.txt)"
  done
done
for v in new notab old; do
  echo "== $v b2,b4 $(date -u +%T)"
  DYNASPA_TAP_TABLE=$(tap $v) timeout 100 $(bin $v)/gpu_sparse_bench --backend cuda --batches 2,4 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
    $([ $v = new ] && echo --dump-masks /tmp/masks24) --json $OUT/r/b24_$v.jsonl > $OUT/r/b24_$v.txt 2>&1; echo "rc=$? wrong=$(grep -c WRONG $OUT/r/b24_$v.txt)"
done
for v in new old; do
  echo "== $v NVIDIA OpenCL b1 $(date -u +%T)"
  timeout 100 $(bin $v)/gpu_sparse_bench --backend opencl --device NVIDIA --batches 1 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
    --json $OUT/r/ocl_$v.jsonl > $OUT/r/ocl_$v.txt 2>&1; echo "rc=$? wrong=$(grep -c WRONG $OUT/r/ocl_$v.txt)"
done
torch_baselines
vs_torch b1_{new,notab,old}_{1,2} b24_{new,notab,old}
full_bins $D $OLD
pack_results
