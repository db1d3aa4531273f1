#!/bin/bash
# Session 11 calls X and Z (sourced by x.sh and z.sh): this session's binaries (dist-s11/)
# against call V's kernel (dist-s11-old/: call V's gpu_sparse_bench and a dynaspa CLI built at
# b487fb1), alternated in one call: ncu on bitmask_tiles, the lagged dispatch of the issue-5
# GEMM ops at batch 1 on CUDA and NVIDIA OpenCL, and the full-size DynConv end to end.
DIST=dist-s11 D=/tmp/d11
source "$(dirname "${BASH_SOURCE[0]}")/../device_s7/common.sh"
for x in dist-s11-old/*.xz; do
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$x" "$D/$(basename $x .xz)"; chmod +x "$D/$(basename $x .xz)"
done
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/full
( timeout 200 python3 models/dynconv.py --sizes full --no-dataset --out /tmp/full > /tmp/full/export.log 2>&1; touch /tmp/full/done ) &
for b in gpu_sparse_bench_old gpu_sparse_bench; do
  timeout 60 ncu --clock-control none -k regex:'^bitmask_tiles$' --launch-skip 2 --launch-count 3 --section SpeedOfLight --section InstructionStats \
    $D/$b --backend cuda --batches 1 --only conv3x3 --densities 0.1 --samples 2 --runs 1 > $OUT/ncu_$b.txt 2>&1
  echo "$b bitmask_tiles: $(grep -E '^\s+Duration' $OUT/ncu_$b.txt | awk '{print $3}' | tr '\n' ' ') us"
  grep -E "SM Active Cycles|Elapsed Cycles|  Issued Instructions  " $OUT/ncu_$b.txt | head -6
done
for be in cuda opencl; do
  for b in gpu_sparse_bench_old gpu_sparse_bench gpu_sparse_bench_old gpu_sparse_bench; do
    [ $be = opencl ] && [ -f $OUT/opencl_$b.jsonl ] && continue
    echo "== $be $b"
    timeout 100 $D/$b --backend $be $([ $be = opencl ] && echo --device NVIDIA) --batches 1 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      --json $OUT/${be}_$b.jsonl 2>&1 | grep -E "^conv|of the lagged" | head -40
  done
done
while [ ! -f /tmp/full/done ]; do sleep 2; done; tail -1 /tmp/full/export.log
M=/tmp/full/dynconv_full_d30.onnx
for rep in 1 2; do
  for b in dynaspa_old dynaspa; do
    echo "== [$rep] $b full DynConv: $(timeout 90 $D/$b bench $M --frames models/frames/vtest --max-frames 20 --rounds 5 --backend cuda 2>&1 | grep -E 'median|speedup_vs_dense' | tr '\n' ' ')"
  done
done
for b in dynaspa_old dynaspa; do
  echo "== $b profile"; timeout 90 $D/$b profile $M --frames models/frames/vtest --max-frames 20 --backend cuda 2>&1 | grep -E "^total|^overhead|sparse ops"
done
date -u
