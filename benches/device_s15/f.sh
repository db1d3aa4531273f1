#!/bin/bash
# Session 15 call F: call E's kernels with the work-items and work-groups that find no column
# back to reading only the count (call E's finish read position and bias in all of them, and
# was 0.3 µs slower than call AJ's), in dist-s15, against call AJ's binaries (dist-s13b,
# c6e7963), alternated twice on the same host: correctness of the new binaries, the issue-5
# convs at batch 1 (sampled schedules) with PyTorch on the same masks, batches 2 and 4, NVIDIA
# OpenCL at batch 1, and the full-size DynConv end to end.
source "$(dirname "$0")/start.sh"
source "$(dirname "$0")/../device_s13/correctness.sh"
( DIST=dist-s13b D=/tmp/d13; source benches/device_s7/common.sh ) ; OLD=/tmp/d13
bin() { [ $1 = old ] && echo $OLD || echo $D; }
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
timeout 80 python3 benches/gpu_baselines.py --masks /tmp/masks1 --batches 1 --runs 100 --json $OUT/r/torch_b1.jsonl > /dev/null 2> $OUT/r/torch_b1.err; echo "torch rc=$?"
timeout 60 python3 benches/gpu_baselines.py --masks /tmp/masks24 --batches 2,4 --runs 100 --json $OUT/r/torch_b24.jsonl > /dev/null 2> $OUT/r/torch_b24.err; echo "torch b24 rc=$?"
for v in new old; do
  for rep in 1 2; do
    python3 benches/gpu_vs_torch.py $OUT/r/b1_${v}_$rep.jsonl $OUT/r/torch_b1.jsonl > $OUT/r/vs_b1_${v}_$rep.txt
    python3 benches/gpu_vs_torch.py $OUT/r/b24_${v}_$rep.jsonl $OUT/r/torch_b24.jsonl > $OUT/r/vs_b24_${v}_$rep.txt
  done
done
while [ ! -f /tmp/full/done ]; do sleep 2; done; tail -1 /tmp/full/export.log
for rep in 1 2; do
  for B in $D $OLD; do
    echo "== [$rep] $B full DynConv: $(timeout 50 $B/dynaspa bench /tmp/full/dynconv_full_d30.onnx --frames models/frames/vtest --max-frames 20 --rounds 5 --backend cuda 2>&1 | grep -E 'median|speedup_vs_dense' | tr '\n' ' ')"
  done
done
tar -C $OUT -czf $OUT/results.tgz r && rm -rf $OUT/r
date -u
