#!/bin/bash
# Session 15 call D: the sparse conv kernels with shorter chains of dependent loads (the split-K
# finish issues its count, position, partial sums and bias together; the tiled GEMM reads its
# columns' positions with the count; self-listing work-groups keep their mask segment as bits and
# list from registers; 1x1 convs compute their reduction offsets instead of loading them), in
# dist-s15, against call AJ's binaries (dist-s13b, c6e7963) on the same host, alternated twice.
# Correctness of the new binaries first; then ncu's kernel durations for the density-0.1 ops
# (calibrated members), the issue-5 convs at batch 1 (sampled schedules) with PyTorch on the
# same masks, batches 2 and 4 once, NVIDIA OpenCL at batch 1 once, and the full-size DynConv
# end to end.
source "$(dirname "$0")/start.sh"
source "$(dirname "$0")/../device_s13/correctness.sh"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for v in new old; do
  B=$(bin $v)
  for op in conv3x3 conv1x1; do
    [ -n "$NCU" ] && timeout 60 $NCU --clock-control none --cache-control none --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread --csv \
      -k regex:'sconv_gemm|sconv_finish' $B/gpu_sparse_bench --backend cuda --batches 1 --only $op --densities 0.1 --samples 2 --runs 2 \
      > $OUT/r/ncu_${op}_$v.csv 2> $OUT/r/ncu_${op}_$v.err; echo "ncu $op $v rc=$? rows=$(wc -l < $OUT/r/ncu_${op}_$v.csv)"
  done
done
mkdir -p /tmp/masks1 /tmp/masks24
for rep in 1 2; do
  for v in new old; do
    B=$(bin $v)
    echo "== [$rep] $v b1 knobs $(date -u +%T)"
    timeout 150 $B/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs 12 --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      $([ $rep = 1 ] && [ $v = new ] && echo --dump-masks /tmp/masks1) --json $OUT/r/b1_${v}_$rep.jsonl > $OUT/r/b1_${v}_$rep.txt 2>&1; echo "rc=$? wrong=$(grep -c WRONG $OUT/r/b1_${v}_$rep.txt)"
  done
done
for v in new old; do
  B=$(bin $v)
  echo "== $v b2,b4 $(date -u +%T)"
  timeout 100 $B/gpu_sparse_bench --backend cuda --batches 2,4 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
    $([ $v = new ] && echo --dump-masks /tmp/masks24) --json $OUT/r/b24_$v.jsonl > $OUT/r/b24_$v.txt 2>&1; echo "rc=$? wrong=$(grep -c WRONG $OUT/r/b24_$v.txt)"
done
for v in new old; do
  B=$(bin $v)
  echo "== $v NVIDIA OpenCL b1 $(date -u +%T)"
  timeout 100 $B/gpu_sparse_bench --backend opencl --device NVIDIA --batches 1 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
    --json $OUT/r/ocl_$v.jsonl > $OUT/r/ocl_$v.txt 2>&1; echo "rc=$? wrong=$(grep -c WRONG $OUT/r/ocl_$v.txt)"
done
torch_baselines
vs_torch b1_new_1 b1_old_1 b1_new_2 b1_old_2 b24_new b24_old
full_bins $D $OLD
pack_results
