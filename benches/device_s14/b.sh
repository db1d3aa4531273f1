#!/bin/bash
# Session 14 calls B and C (same script; binaries of 35778f8, then of 059d04b, in dist-s14):
# grids sized per frame from the counts against the full grids of session 13 (dist-s13b:
# gpu_sparse_bench and dynaspa of call AJ's binaries, c6e7963, unpacked into /tmp/d13), same
# host, alternated twice. Correctness of the new binaries first (self-check, test binaries: on CUDA the
# self-listing members and frames that outgrow their grid run there), then the issue-5 convs
# at batch 1 (sampled schedules) and batches 2 and 4, PyTorch on the same masks, and the
# full-size DynConv end to end.
FULL=1 source "$(dirname "$0")/start.sh"
source "$(dirname "$0")/correctness.sh"
( DIST=dist-s13b D=/tmp/d13; source benches/device_s7/common.sh ) ; OLD=/tmp/d13
mkdir -p /tmp/masks1 /tmp/masks24
for rep in 1 2; do
  for v in new old; do
    B=$([ $v = new ] && echo $D || echo $OLD)
    echo "== [$rep] $v b1 knobs $(date -u +%T)"
    timeout 150 $B/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs 12 --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      $([ $rep = 1 ] && [ $v = new ] && echo --dump-masks /tmp/masks1) --json $OUT/r/b1_${v}_$rep.jsonl > $OUT/r/b1_${v}_$rep.txt 2>&1; echo "rc=$? wrong=$(grep -c WRONG $OUT/r/b1_${v}_$rep.txt)"
    echo "== [$rep] $v b2,b4 $(date -u +%T)"
    timeout 120 $B/gpu_sparse_bench --backend cuda --batches 2,4 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      $([ $rep = 1 ] && [ $v = new ] && echo --dump-masks /tmp/masks24) --json $OUT/r/b24_${v}_$rep.jsonl > $OUT/r/b24_${v}_$rep.txt 2>&1; echo "rc=$? wrong=$(grep -c WRONG $OUT/r/b24_${v}_$rep.txt)"
  done
done
timeout 80 python3 benches/gpu_baselines.py --masks /tmp/masks1 --batches 1 --runs 100 --json $OUT/r/torch_b1.jsonl > /dev/null 2> $OUT/r/torch_b1.err; echo "torch rc=$?"
timeout 80 python3 benches/gpu_baselines.py --masks /tmp/masks24 --batches 2,4 --runs 100 --json $OUT/r/torch_b24.jsonl > /dev/null 2> $OUT/r/torch_b24.err; echo "torch b24 rc=$?"
for f in b1_new_1 b1_old_1 b1_new_2 b1_old_2; do echo "-- $f"; python3 benches/gpu_vs_torch.py $OUT/r/$f.jsonl $OUT/r/torch_b1.jsonl > $OUT/r/vs_$f.txt; done
for f in b24_new_1 b24_old_1 b24_new_2 b24_old_2; do python3 benches/gpu_vs_torch.py $OUT/r/$f.jsonl $OUT/r/torch_b24.jsonl > $OUT/r/vs_$f.txt; done
while [ ! -f /tmp/full/done ]; do sleep 2; done; tail -1 /tmp/full/export.log
for rep in 1 2; do
  for B in $D $OLD; do
    echo "== [$rep] $B full DynConv: $(timeout 60 $B/dynaspa bench /tmp/full/dynconv_full_d30.onnx --frames models/frames/vtest --max-frames 20 --rounds 5 --backend cuda 2>&1 | grep -E 'median|speedup_vs_dense' | tr '\n' ' ')"
  done
done
tar -C $OUT -czf $OUT/results.tgz r && rm -rf $OUT/r
date -u
