#!/bin/bash
# Session 11 call AA: the OpenCL staging no longer waits for an earlier copy before queueing the
# next (dist-s11/, this commit) against call Z's binary (dist-s11-z/): the lagged dispatch of
# the issue-5/6 GEMM ops at batch 1 on NVIDIA OpenCL, alternated, then CUDA once.
DIST=dist-s11 D=/tmp/d11
source "$(dirname "$0")/../device_s7/common.sh"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" dist-s11-z/gpu_sparse_bench.xz $D/gpu_sparse_bench_z; chmod +x $D/gpu_sparse_bench_z
exec > >(tee $OUT/log.txt) 2>&1
date -u
for b in gpu_sparse_bench_z gpu_sparse_bench gpu_sparse_bench_z gpu_sparse_bench; do
  echo "== opencl $b"
  timeout 100 $D/$b --backend opencl --device NVIDIA --batches 1 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
    --json $OUT/opencl_$b.jsonl 2>&1 | grep -E "^conv|of the lagged|^    [a-z]" | head -40
done
echo "== cuda gpu_sparse_bench"
timeout 100 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
  --json $OUT/cuda.jsonl 2>&1 | grep -E "^conv|of the lagged|^    [a-z]" | head -40
date -u
