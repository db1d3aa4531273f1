#!/bin/bash
# Session 14 call A: the atomic split-K finish (FUSED_FINISH=2) on CUDA. Correctness (self-check,
# test binaries; gpu_fused_finish runs all three finishes, and the others run again with the
# atomic one), then the issue-5 convs at batch 1 with sampled schedules, split / last-group /
# atomic on the same masks, PyTorch on those masks; and the experiment of that commit's pack
# only (DYNASPA_EXP_MAX_COLUMNS: 1x1 grids cut to 256 columns, at density 0.1, where no frame
# has more), what the work-groups past the frame's columns cost. Binaries: commit 8458b94 (the
# atomic finish, reverted after this call) with call_a_experiment.patch applied (the column cap,
# and DYNASPA_FUSED_FINISH / DYNASPA_ATOMIC_FINISH read by executables built with default
# options), packed by pack.sh.
source "$(dirname "$0")/start.sh"
source "$(dirname "$0")/correctness.sh"
for t in gpu_sparse gpu_models; do
  DYNASPA_FUSED_FINISH=1 DYNASPA_ATOMIC_FINISH=1 DYNASPA_REQUIRE_BACKENDS=cuda timeout 150 $D/t_$t --test-threads 4 > $OUT/r/test_atomic_$t.txt 2>&1; echo "atomic test $t rc=$? $(grep '^test result' $OUT/r/test_atomic_$t.txt | tail -1)"
  grep -E "FAILED|panicked" $OUT/r/test_atomic_$t.txt | head -5 | cut -c1-300
done
mkdir -p /tmp/masks1
echo "== b1 knobs, finish all $(date -u +%T)"
timeout 280 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs 12 --densities 0.1,0.3,0.5 --samples 15 --runs 10 --fused-finish all \
  --dump-masks /tmp/masks1 --json $OUT/r/b1_all.jsonl > $OUT/r/b1_all.txt 2>&1; echo "rc=$?"; grep -E "WRONG|cannot" $OUT/r/b1_all.txt | head -10
timeout 80 python3 benches/gpu_baselines.py --masks /tmp/masks1 --batches 1 --runs 100 --json $OUT/r/torch_b1.jsonl > /dev/null 2> $OUT/r/torch_b1.err; echo "torch rc=$?"
python3 benches/gpu_vs_torch.py $OUT/r/b1_all.jsonl $OUT/r/torch_b1.jsonl | tee $OUT/r/vs_b1_all.txt
for cap in 256 0; do
  echo "== b1,2,4 d0.1 knobs, EXP_MAX_COLUMNS=$cap $(date -u +%T)"
  DYNASPA_EXP_MAX_COLUMNS=$([ $cap = 0 ] && echo "" || echo $cap) timeout 200 $D/gpu_sparse_bench --backend cuda --batches 1,2,4 --only conv --knobs 12 --densities 0.1 --samples 15 --runs 10 --fused-finish atomic \
    --json $OUT/r/cap$cap.jsonl > $OUT/r/cap$cap.txt 2>&1; echo "rc=$?"; grep -cE "WRONG" $OUT/r/cap$cap.txt
done
tar -C $OUT -czf $OUT/results.tgz r && rm -rf $OUT/r
date -u
