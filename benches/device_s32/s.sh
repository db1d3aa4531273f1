#!/bin/bash
# Session 32 calls (bash s.sh N on the GPU host; binaries from benches/device_s13/pack.sh with
# DIST=dist-s32 TESTS=gpu_sparse).
#   1 (call 32.1): conv1x1 at density 0.1, batches 1, 2 and 4, over sched.py's members (tiles of
#      16 and 32 columns with splits that fill the SMs evenly, and the 64 x 64 / 128 x 64 members
#      that were fastest before), the bench building its executables on every core first
#      (--jobs); PyTorch's conv1x1 on the same masks; then gpu_sparse on CUDA (the kernel cache
#      now compiles outside its lock).
#   2 (call 32.2, 32.1's host): sched.py 2 (around 32.1's winners: 256-channel tiles, more splits
#      and work-item shapes) with each member's finish fused and split (--fused-finish both),
#      PyTorch again; then sched.py 2 at batches 1 and 4 split only, a second round.
#   3 (call 32.3): self-listing members finishing their split in the GEMM's last work-group
#      (DYNASPA_SL_FUSED=1, "slf") against the second launch ("sls"), sched.py 2 at batches 1, 2
#      and 4, two rounds alternated; PyTorch; member-by-member ratios (fused_pairs.py).
#   4 (call 32.4, DIST=dist-s32b D=/tmp/d32b: SC_FIN_SPEC and DYNASPA_SC_BLOCKS): gpu_sparse with
#      the split finish's first loads beside its count (DYNASPA_SC_FIN_SPEC=1); sched.py 3 at
#      batches 1, 2 and 4 with it ("fs") and without ("nofs"), two rounds alternated; then at
#      batch 4, three groups of 256 per SM as the register bound ("b3", DYNASPA_SC_BLOCKS=3)
#      against two; PyTorch.
#   5 (call 32.5, DIST=dist-s32c D=/tmp/d32c: the tree as landed, SC_FIN_SPEC on by default):
#      gpu_sparse, gpu_fused_finish; conv1x1 at 0.1, batches 1, 2, 4, the bench's sample (with
#      the 128 x 32 tiles added), speculative finish on ("fs") and off ("nofs", DYNASPA_SC_FIN_SPEC=0),
#      two rounds alternated; PyTorch.
#   6 (call 32.6, dist-s32c): the three GEMM convs at batch 1 and 0.1, fs against nofs, two rounds;
#      gpu_models; PyTorch.
#   7 (call 32.7, DIST=dist-s32d D=/tmp/d32d: the bench's steady member picked over five
#      alternated rounds): conv1x1 at 0.1, batches 1, 2, 4, two rounds; the three GEMM convs at
#      batch 1; PyTorch.
stage=$1
source "$(dirname "$0")/start.sh"
keep() { (cd $OUT && tar czf r_$stage.tgz r); }
if [ "$stage" = 1 ]; then
  sweep a; keep
  torch_sw 1; keep
  python3 benches/device_s24/best.py $OUT/r/sw_a.jsonl $OUT/r/torch_sw_1.jsonl | tee $OUT/r/best_sw_a.txt
  python3 benches/device_s32/rank.py $OUT/r/sw_a.jsonl 12 | tee $OUT/r/rank_sw_a.txt
  keep
  gpu_test gpu_sparse gpu_sparse_1; keep
elif [ "$stage" = 2 ]; then
  SWEEP=2 BARGS="--fused-finish both" sweep b; keep
  torch_sw 2; keep
  python3 benches/device_s32/rank.py $OUT/r/sw_b.jsonl 14 | tee $OUT/r/rank_sw_b.txt
  python3 benches/device_s24/best.py $OUT/r/sw_b.jsonl $OUT/r/torch_sw_2.jsonl | tee $OUT/r/best_sw_b.txt
  keep
  SWEEP=2 BATCHES=1,4 sweep c; keep
  python3 benches/device_s32/rank.py $OUT/r/sw_c.jsonl 8 | tee $OUT/r/rank_sw_c.txt
  python3 benches/device_s24/best.py $OUT/r/sw_c.jsonl $OUT/r/torch_sw_2.jsonl | tee $OUT/r/best_sw_c.txt
  keep
elif [ "$stage" = 3 ]; then
  for r in 1 2; do
    SWEEP=2 sweep slf_$r DYNASPA_SL_FUSED=1; keep
    SWEEP=2 sweep sls_$r; keep
  done
  torch_sw 3; keep
  for v in slf_1 sls_1 slf_2 sls_2; do python3 benches/device_s24/best.py $OUT/r/sw_$v.jsonl $OUT/r/torch_sw_3.jsonl | tee $OUT/r/best_sw_$v.txt; done
  python3 benches/device_s32/fused_pairs.py $OUT/r/sw_slf_1.jsonl $OUT/r/sw_sls_1.jsonl $OUT/r/sw_slf_2.jsonl $OUT/r/sw_sls_2.jsonl | tee $OUT/r/pairs_3.txt
  keep
elif [ "$stage" = 4 ]; then
  gpu_test gpu_sparse gpu_sparse_4 DYNASPA_SC_FIN_SPEC=1; keep
  for r in 1 2; do
    SWEEP=3 sweep fs_$r DYNASPA_SC_FIN_SPEC=1; keep
    SWEEP=3 sweep nofs_$r; keep
  done
  torch_sw 4; keep
  SWEEP=2 BATCHES=4 sweep b3 DYNASPA_SC_BLOCKS=3; keep
  SWEEP=2 BATCHES=4 sweep b2; keep
  for v in fs_1 nofs_1 fs_2 nofs_2 b3 b2; do python3 benches/device_s24/best.py $OUT/r/sw_$v.jsonl $OUT/r/torch_sw_4.jsonl | tee $OUT/r/best_sw_$v.txt; done
  python3 benches/device_s32/fused_pairs.py $OUT/r/sw_fs_1.jsonl $OUT/r/sw_nofs_1.jsonl $OUT/r/sw_fs_2.jsonl $OUT/r/sw_nofs_2.jsonl \
    $OUT/r/sw_b3.jsonl $OUT/r/sw_b2.jsonl | tee $OUT/r/pairs_4.txt
  keep
elif [ "$stage" = 5 ]; then
  gpu_test gpu_sparse gpu_sparse_5; keep
  gpu_test gpu_fused_finish gpu_fused_finish_5; keep
  for r in 1 2; do
    knobs fs_$r; keep
    knobs nofs_$r DYNASPA_SC_FIN_SPEC=0; keep
  done
  torch_sw 5; keep
  for v in fs_1 nofs_1 fs_2 nofs_2; do python3 benches/device_s24/best.py $OUT/r/kn_$v.jsonl $OUT/r/torch_sw_5.jsonl | tee $OUT/r/best_kn_$v.txt; done
  python3 benches/device_s32/fused_pairs.py $OUT/r/kn_fs_1.jsonl $OUT/r/kn_nofs_1.jsonl $OUT/r/kn_fs_2.jsonl $OUT/r/kn_nofs_2.jsonl | tee $OUT/r/pairs_5.txt
  keep
elif [ "$stage" = 6 ]; then
  for r in 1 2; do
    ONLY=conv BATCHES=1 knobs c_fs_$r; keep
    ONLY=conv BATCHES=1 knobs c_nofs_$r DYNASPA_SC_FIN_SPEC=0; keep
  done
  BATCHES=1 TONLY=conv torch_sw 6; keep
  for v in c_fs_1 c_nofs_1 c_fs_2 c_nofs_2; do python3 benches/device_s24/best.py $OUT/r/kn_$v.jsonl $OUT/r/torch_sw_6.jsonl | tee $OUT/r/best_kn_$v.txt; done
  python3 benches/device_s32/fused_pairs.py $OUT/r/kn_c_fs_1.jsonl $OUT/r/kn_c_nofs_1.jsonl $OUT/r/kn_c_fs_2.jsonl $OUT/r/kn_c_nofs_2.jsonl | tee $OUT/r/pairs_6.txt
  keep
  gpu_test gpu_models gpu_models_6; keep
elif [ "$stage" = 7 ]; then
  knobs f_1; keep
  knobs f_2; keep
  ONLY=conv BATCHES=1 knobs c_f; keep
  TONLY=conv torch_sw 7; keep
  for v in f_1 f_2 c_f; do python3 benches/device_s24/best.py $OUT/r/kn_$v.jsonl $OUT/r/torch_sw_7.jsonl | tee $OUT/r/best_kn_$v.txt; done
  keep
fi
