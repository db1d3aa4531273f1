#!/bin/bash
# Session 16 call H: where programmatic launches trigger the next grid, with the same binaries
# (dist-s16): at each block's start (default), late (DYNASPA_PDL=late: the sparse GEMM before
# its stores, other kernels at their blocks' ends), at the start but only for the sparse-conv
# and bitmask kernels (DYNASPA_PDL_FILES), and off; alternated twice on the same host. The
# issue-5 convs at batch 1 (sampled schedules) with PyTorch on the same masks, A-ViT's token ops,
# the full-size DynConv; correctness first (default, then the sparse and model tests late).
# Run at d4c3b0d, where the start trigger was the default and DYNASPA_PDL=late chose the late
# one; since call H the late trigger is the default and DYNASPA_PDL=early the other (i.sh).
source "$(dirname "$0")/start.sh"
source "$(dirname "$0")/../device_s13/correctness.sh"
for t in gpu_sparse gpu_models; do
  DYNASPA_PDL=late DYNASPA_REQUIRE_BACKENDS=cuda timeout 150 $D/t_$t --test-threads 4 > $OUT/r/test_late_$t.txt 2>&1; echo "late test $t rc=$? $(grep '^test result' $OUT/r/test_late_$t.txt | tail -1)"
done
mkdir -p /tmp/masks1 /tmp/avm
envs() { case $1 in early) echo DYNASPA_PDL=1;; late) echo DYNASPA_PDL=late;; conv) echo DYNASPA_PDL_FILES=sparse_conv.cl,bitmask.cl;; off) echo DYNASPA_PDL=0;; esac; }
for rep in 1 2; do
  for v in early late conv off; do
    echo "== [$rep] $v $(date -u +%T)"
    first=$([ $rep = 1 ] && [ $v = early ] && echo 1)
    env $(envs $v) timeout 150 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs 12 --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      ${first:+--dump-masks /tmp/masks1} --json $OUT/r/b1_${v}_$rep.jsonl > $OUT/r/b1_${v}_$rep.txt 2>&1; echo "b1 rc=$? wrong=$(grep -c WRONG $OUT/r/b1_${v}_$rep.txt)"
    env $(envs $v) timeout 80 $D/gpu_sparse_bench --backend cuda --avit --batches 1 --samples 15 --runs 10 \
      ${first:+--dump-masks /tmp/avm} --json $OUT/r/avit_${v}_$rep.jsonl > $OUT/r/avit_${v}_$rep.txt 2>&1; echo "avit rc=$? wrong=$(grep -c WRONG $OUT/r/avit_${v}_$rep.txt)"
  done
done
timeout 80 python3 benches/gpu_baselines.py --masks /tmp/masks1 --batches 1 --runs 100 --json $OUT/r/torch_b1.jsonl > /dev/null 2> $OUT/r/torch_b1.err; echo "torch rc=$?"
timeout 60 python3 benches/gpu_baselines.py --attention /tmp/avm --runs 100 --json $OUT/r/torch_attn.jsonl > $OUT/r/torch_attn.txt 2>&1; echo "torch attn rc=$?"
for v in early late conv off; do for rep in 1 2; do python3 benches/gpu_vs_torch.py $OUT/r/b1_${v}_$rep.jsonl $OUT/r/torch_b1.jsonl > $OUT/r/vs_b1_${v}_$rep.txt; done; done
while [ ! -f /tmp/full/done ]; do sleep 2; done; tail -1 /tmp/full/export.log
for rep in 1 2; do
  for v in early late conv off; do full_run "[$rep] $v" $D $(envs $v); done
done
pack_results
