#!/bin/bash
# Session 15 call F: call E's kernels with the work-items and work-groups that find no column
# back to reading only the count (call E's finish read position and bias in all of them, and
# was 0.3 µs slower than call AJ's), in dist-s15, against call AJ's binaries (dist-s13b,
# c6e7963), alternated twice on the same host: correctness of the new binaries, the issue-5
# convs at batch 1 (sampled schedules) with PyTorch on the same masks, batches 2 and 4, NVIDIA
# OpenCL at batch 1, and the full-size DynConv end to end.
source "$(dirname "$0")/start.sh"
source "$(dirname "$0")/../device_s13/correctness.sh"
mkdir -p /tmp/masks1 /tmp/masks24
for rep in 1 2; do
  for v in new old; do
    echo "== [$rep] $v $(date -u +%T)"
    timeout 150 $(bin $v)/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs 12 --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      $([ $rep = 1 ] && [ $v = new ] && echo --dump-masks /tmp/masks1) --json $OUT/r/b1_${v}_$rep.jsonl > $OUT/r/b1_${v}_$rep.txt 2>&1; echo "b1 rc=$? wrong=$(grep -c WRONG $OUT/r/b1_${v}_$rep.txt)"
    timeout 100 $(bin $v)/gpu_sparse_bench --backend cuda --batches 2,4 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      $([ $rep = 1 ] && [ $v = new ] && echo --dump-masks /tmp/masks24) --json $OUT/r/b24_${v}_$rep.jsonl > $OUT/r/b24_${v}_$rep.txt 2>&1; echo "b24 rc=$? wrong=$(grep -c WRONG $OUT/r/b24_${v}_$rep.txt)"
    timeout 100 $(bin $v)/gpu_sparse_bench --backend opencl --device NVIDIA --batches 1 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      --json $OUT/r/ocl_${v}_$rep.jsonl > $OUT/r/ocl_${v}_$rep.txt 2>&1; echo "ocl rc=$? wrong=$(grep -c WRONG $OUT/r/ocl_${v}_$rep.txt)"
  done
done
torch_baselines
vs_torch b1_{new,old}_{1,2} b24_{new,old}_{1,2}
full_bins $D $OLD
pack_results
