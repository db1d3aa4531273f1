#!/bin/bash
# Session 30 calls (bash s.sh N on the GPU host; binaries from benches/device_s13/pack.sh).
#   1 (call 30.1, dist-s30: SL_EARLY on, work-groups of self-listing members that take window
#      after window of columns, and DYNASPA_SL_GRID=F sizing those grids for the fraction F of
#      the positions): gpu_sparse and gpu_fused_finish on CUDA with grids for 5% of the
#      positions (most frames' work-groups take several windows) and as built; conv1x1 at batch
#      1 and 0.1, grids for 15% ("g15") against every position ("full"), alternated twice;
#      PyTorch.
# Calls 30.2 and on (dist-s30b, D=/tmp/d30b: grids sized per frame from the columns the counts
# it selects with expect, unless DYNASPA_SL_GRID=0; "new" against "off"):
#   2 (call 30.2): gpu_sparse and gpu_fused_finish on CUDA; conv1x1 at batch 1 and 0.1, new and
#      off alternated twice; PyTorch. (Its batch-2-and-4 half did not start: b24 was called
#      with an extra argument.)
# Calls 30.3 and on (dist-s30c: dist-s30b's kernels; the bench's steady member is the fastest
# as dispatched of the three fastest alone):
#   3 (call 30.3): every conv at batch 1 and 0.1, new then off; PyTorch.
#   4 (call 30.4): batches 2 and 4 at 0.1, conv1x1 and stride 2, new then off; PyTorch.
#   5 (call 30.5): every conv at batch 1 and densities 0.3 and 0.5, new then off; PyTorch.
#   6 (call 30.6, DIST=dist-s30d D=/tmp/d30d, OLD=dist-s30o: session 29's last tree, 4aa7b0d,
#      its bench alone): gpu_models on CUDA; conv3x3 and stride 2 at batch 1 and 0.1 with this
#      tree, then with session 29's.
#   7 (call 30.7, DIST=dist-s30e D=/tmp/d30e: the window loop's per-window values computed in
#      the loop, NO_HOIST): gpu_sparse on CUDA; conv3x3 and stride 2 at batch 1 and 0.1.
#   8 (not run yet; DIST=dist-s30e or a later tree): SL_EARLY on against off with the narrowed
#      grids, every conv at batch 1 and 0.1, alternated twice.
stage=$1
source "$(dirname "$0")/start.sh"
# Archived after every step: the call may run out of device time before the end.
keep() { (cd $OUT && tar czf r_$stage.tgz r); }
# conv1x1 at batch 1 and 0.1 as TAG_A (the build's defaults, masks dumped) and TAG_B (with
# NAME=VALUE...) alternated twice, each kept, then PyTorch on the masks: c1_ab TAG_A TAG_B [NAME=VALUE...]
c1_ab() {
  local a=$1 b=$2 l=${L1:-150} r; shift 2
  for r in 1 2; do
    ONLY=conv1x1 LIMIT=$l DUMP=1 bench_lo c1_${a}_$r $D; keep
    ONLY=conv1x1 LIMIT=$l bench_lo c1_${b}_$r $D "$@"; keep
    l=60
  done
  torch_b1 $stage; cp $OUT/r/torch_b1_$stage.jsonl $OUT/r/torch_b1lo_$stage.jsonl
}
if [ "$stage" = 1 ]; then
  gpu_test gpu_sparse gpu_sparse_g05 DYNASPA_SL_GRID=0.05; keep
  gpu_test gpu_fused_finish gpu_fused_finish_g05 DYNASPA_SL_GRID=0.05; keep
  gpu_test gpu_sparse gpu_sparse_def; keep
  c1_ab full g15 $G15
  pairs c1_1 b1lo_c1_g15_1 b1lo_c1_full_1 b1lo_c1_g15_2 b1lo_c1_full_2
  keep
elif [ "$stage" = 2 ]; then
  gpu_test gpu_sparse gpu_sparse_2; keep
  gpu_test gpu_fused_finish gpu_fused_finish_2; keep
  c1_ab new off $OFF
  pairs c1_2 b1lo_c1_new_1 b1lo_c1_off_1 b1lo_c1_new_2 b1lo_c1_off_2
  keep
  for op in conv1x1 conv3x3s2; do
    ONLY=$op LIMIT=${L2:-200} DUMP=1 b24 ${op}_new; keep
    ONLY=$op LIMIT=${L2:-200} b24 ${op}_off $OFF; keep
  done
  for v in new off; do cat $OUT/r/b24k_conv1x1_$v.jsonl $OUT/r/b24k_conv3x3s2_$v.jsonl > $OUT/r/b24k_${v}_2.jsonl; done
  torch_b24 2
  for v in new off; do best b24k $v 2; done
  pairs b24_2 b24k_new_2 b24k_off_2
  keep
elif [ "$stage" = 3 ]; then
  # Every conv (conv3x3, conv3x3s2, conv1x1) at batch 1 and 0.1, new then off.
  LIMIT=${L3:-330} DUMP=1 bench_lo new_3 $D; keep
  LIMIT=${L3:-200} bench_lo off_3 $D $OFF; keep
  torch_b1 3; cp $OUT/r/torch_b1_3.jsonl $OUT/r/torch_b1lo_3.jsonl
  for v in new off; do best b1lo $v 3; done
  pairs ops_3 b1lo_new_3 b1lo_off_3
  keep
elif [ "$stage" = 4 ]; then
  # Batches 2 and 4 at 0.1, conv1x1 and stride 2 in one bench each way.
  ONLY=conv1x1 LIMIT=${L4:-200} DUMP=1 b24 c1_new; keep
  ONLY=conv3x3s2 LIMIT=${L4:-200} DUMP=1 b24 s2_new; keep
  cat $OUT/r/b24k_c1_new.jsonl $OUT/r/b24k_s2_new.jsonl > $OUT/r/b24k_new_4.jsonl
  torch_b24 4; cp $OUT/r/torch_b24_4.jsonl $OUT/r/torch_b24k_4.jsonl; keep
  ONLY=conv1x1 LIMIT=${L4:-120} b24 c1_off $OFF; keep
  ONLY=conv3x3s2 LIMIT=${L4:-120} b24 s2_off $OFF; keep
  cat $OUT/r/b24k_c1_off.jsonl $OUT/r/b24k_s2_off.jsonl > $OUT/r/b24k_off_4.jsonl
  for v in new off; do best b24k $v 4; done
  pairs b24_4 b24k_new_4 b24k_off_4
  keep
elif [ "$stage" = 5 ]; then
  # Every conv at batch 1 and densities 0.3 and 0.5, new then off; PyTorch on the same masks.
  for v in new:"DYNASPA_SL_GRID=1" off:"$OFF"; do
    mkdir -p /tmp/masks1
    env ${v#*:} timeout ${L5:-200} $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --knobs 12 --densities 0.3,0.5 \
      --samples 15 --runs 10 --dump-masks /tmp/masks1 --json $OUT/r/b1m_${v%%:*}_5.jsonl > $OUT/r/b1m_${v%%:*}_5.txt 2>&1
    rc=$?; echo "$(date -u +%T) b1m ${v%%:*} rc=$rc wrong=$(grep -c WRONG $OUT/r/b1m_${v%%:*}_5.txt)"; keep
  done
  torch_b1 5; cp $OUT/r/torch_b1_5.jsonl $OUT/r/torch_b1m_5.jsonl
  for v in new off; do best b1m $v 5; done
  pairs m_5 b1m_new_5 b1m_off_5
  keep
elif [ "$stage" = 6 ]; then
  # DIST=dist-s30d (this tree with gpu_models); OLD=dist-s30o: session 29's last tree (4aa7b0d).
  gpu_test gpu_models gpu_models_6; keep
  mkdir -p /tmp/d30o
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" ${OLD:-dist-s30o}/gpu_sparse_bench.xz /tmp/d30o/gpu_sparse_bench
  chmod +x /tmp/d30o/gpu_sparse_bench
  # conv3x3 and stride 2 at batch 1 and 0.1: this tree, then session 29's.
  ONLY=conv3x3 LIMIT=${L6:-200} bench_lo new_6 $D; keep
  ONLY=conv3x3 LIMIT=${L6:-200} bench_lo old_6 /tmp/d30o; keep
  pairs tree_6 b1lo_new_6 b1lo_old_6
  keep
elif [ "$stage" = 7 ]; then
  # DIST=dist-s30e: the window loop computing its per-window values in the loop (NO_HOIST).
  gpu_test gpu_sparse gpu_sparse_7; keep
  ONLY=conv3x3 LIMIT=${L7:-220} bench_lo new_7 $D; keep
elif [ "$stage" = 8 ]; then
  # Not run in session 30 (no device time left): SL_EARLY on (the default) against off, with
  # the narrowed grids, every conv at batch 1 and 0.1, alternated twice; the first candidate
  # for the 6-7% the median member lost against session 29's tree (RESULTS.md, session 30).
  for r in 1 2; do
    LIMIT=${L8:-330} bench_lo early_$r $D; keep
    LIMIT=${L8:-200} bench_lo noearly_$r $D DYNASPA_SL_EARLY=0; keep
    L8=120
  done
  pairs early_8 b1lo_early_1 b1lo_noearly_1 b1lo_early_2 b1lo_noearly_2
  keep
fi
exit 0
