#!/bin/bash
# Session 16 call G: programmatic dependent launch (cuda/pdl.rs) on against off (DYNASPA_PDL=0)
# with the same binaries (dist-s16), alternated twice on the same host: correctness with it on,
# the issue-5 convs at batch 1 (sampled schedules) with PyTorch on the same masks, batches 2
# and 4, A-ViT's attention at batch 1, and the full-size DynConv end to end.
source "$(dirname "$0")/start.sh"
source "$(dirname "$0")/../device_s13/correctness.sh"
mkdir -p /tmp/masks1 /tmp/masks24 /tmp/avm
pdl() { [ $1 = pdl ] && echo 1 || echo 0; }
for rep in 1 2; do
  for v in pdl nopdl; do
    echo "== [$rep] $v $(date -u +%T)"
    first=$([ $rep = 1 ] && [ $v = pdl ] && echo 1)
    DYNASPA_PDL=$(pdl $v) timeout 150 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs 12 --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      ${first:+--dump-masks /tmp/masks1} --json $OUT/r/b1_${v}_$rep.jsonl > $OUT/r/b1_${v}_$rep.txt 2>&1; echo "b1 rc=$? wrong=$(grep -c WRONG $OUT/r/b1_${v}_$rep.txt)"
    DYNASPA_PDL=$(pdl $v) timeout 100 $D/gpu_sparse_bench --backend cuda --batches 2,4 --only conv --densities 0.1,0.3,0.5 --samples 15 --runs 10 \
      ${first:+--dump-masks /tmp/masks24} --json $OUT/r/b24_${v}_$rep.jsonl > $OUT/r/b24_${v}_$rep.txt 2>&1; echo "b24 rc=$? wrong=$(grep -c WRONG $OUT/r/b24_${v}_$rep.txt)"
    DYNASPA_PDL=$(pdl $v) timeout 80 $D/gpu_sparse_bench --backend cuda --avit --batches 1 --samples 15 --runs 10 \
      ${first:+--dump-masks /tmp/avm} --json $OUT/r/avit_${v}_$rep.jsonl > $OUT/r/avit_${v}_$rep.txt 2>&1; echo "avit rc=$? wrong=$(grep -c WRONG $OUT/r/avit_${v}_$rep.txt)"
  done
done
torch_baselines
timeout 60 python3 benches/gpu_baselines.py --attention /tmp/avm --runs 100 --json $OUT/r/torch_attn.jsonl > $OUT/r/torch_attn.txt 2>&1; echo "torch attn rc=$?"
vs_torch b1_{pdl,nopdl}_{1,2} b24_{pdl,nopdl}_{1,2}
full_ab DYNASPA_PDL 1 0
pack_results
