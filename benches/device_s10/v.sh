#!/bin/bash
# Session 10 call V: the bitmask kernel with the mask's words in local memory and a work-item
# per word (binary of this commit, gpu_sparse_bench) against call T's binary
# (gpu_sparse_bench_t, carried in dist-s10-old/), alternated in one call: ncu on bitmask_tiles
# for both, then the issue-5 GEMM ops at batch 1 on CUDA and NVIDIA OpenCL, old/new/old/new.
DIST=dist-s10 D=/tmp/d10
source "$(dirname "$0")/../device_s7/common.sh"
python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('dist-s10-old/gpu_sparse_bench_t.xz'), open('$D/gpu_sparse_bench_t','wb'))"; chmod +x $D/gpu_sparse_bench_t
exec > >(tee $OUT/log.txt) 2>&1
date -u
for b in gpu_sparse_bench_t gpu_sparse_bench; do
  timeout 60 ncu --clock-control none -k regex:'^bitmask_tiles$' --launch-skip 2 --launch-count 3 --section SpeedOfLight \
    $D/$b --backend cuda --batches 1 --only conv3x3 --densities 0.1 --samples 2 --runs 1 > $OUT/ncu_$b.txt 2>&1
  echo "$b bitmask_tiles: $(grep -E '^\s+Duration' $OUT/ncu_$b.txt | awk '{print $3}' | tr '\n' ' ') us"
done
for be in cuda opencl; do
  for b in gpu_sparse_bench_t gpu_sparse_bench gpu_sparse_bench_t gpu_sparse_bench; do
    echo "== $be $b"
    timeout 100 $D/$b --backend $be $([ $be = opencl ] && echo --device NVIDIA) --batches 1 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      --json $OUT/${be}_$b.jsonl 2>&1 | grep -E "^conv|launches|^    tiles" | head -40
  done
done
date -u
