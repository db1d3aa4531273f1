#!/bin/bash
# Session 33 calls (bash s.sh N on the GPU host; binaries from benches/device_s13/pack.sh with
# DIST=dist-s33 TESTS="gpu_sparse gpu_fused_finish gpu_models").
#   1 (call 33.1): gpu_sparse on CUDA with the new frame boundary (SL_PREWAIT, FIN_TRIGGER,
#      the counts' event at the read: the binaries' defaults); conv1x1 at density 0.1, batches
#      1, 2 and 4, the bench's sample, new ("n") against OLD ("o"), two rounds alternated;
#      PyTorch on the same masks; member-by-member ratios (fused_pairs.py).
#   2 (call 33.2, FULL=1: the full-size models exported in the background): each of the three
#      alone against OLD (conv1x1, batches 1 and 4); the three GEMM convs at batch 1, new against
#      OLD; gpu_fused_finish and gpu_models on CUDA; the full-size DynConv end to end (`dynaspa
#      bench`, vtest frames), new against OLD, two rounds alternated.
#   3 (call 33.3, the tree as landed): the three GEMM convs at density 0.1, batches 2 and 4, the
#      bench's sample; PyTorch on the same masks; then at batch 1 and densities 0.3, 0.5 and 1.0
#      with four sampled members; PyTorch again.
#   4 (call 33.4, DIST=dist-s33b D=/tmp/d33b: DYNASPA_SC_TRIGGER=early, the GEMM's trigger after
#      its wait): conv1x1 at 0.1, batches 1, 2, 4, and the three GEMM convs at batch 1, early
#      ("e") against the default late trigger ("l"), two rounds alternated; PyTorch; gpu_sparse
#      with the early trigger; cuda_selfcheck (the tree's defaults).
stage=$1
source "$(dirname "$0")/start.sh"
keep() { (cd $OUT && tar czf r_$stage.tgz r); }
if [ "$stage" = 1 ]; then
  gpu_test gpu_sparse gpu_sparse_1; keep
  for r in 1 2; do
    knobs n_$r; keep
    knobs o_$r $OLD; keep
  done
  torch_sw 1; keep
  for v in n_1 o_1 n_2 o_2; do python3 benches/device_s24/best.py $OUT/r/kn_$v.jsonl $OUT/r/torch_sw_1.jsonl | tee $OUT/r/best_kn_$v.txt; done
  python3 benches/device_s32/fused_pairs.py $OUT/r/kn_n_1.jsonl $OUT/r/kn_o_1.jsonl $OUT/r/kn_n_2.jsonl $OUT/r/kn_o_2.jsonl | tee $OUT/r/pairs_1.txt
  keep
elif [ "$stage" = 2 ]; then
  BATCHES=1,4 knobs pre $ONLY_PRE; keep
  BATCHES=1,4 knobs trig $ONLY_TRIG; keep
  BATCHES=1,4 knobs ev $ONLY_EV; keep
  BATCHES=1,4 knobs o $OLD; keep
  python3 benches/device_s32/fused_pairs.py $OUT/r/kn_pre.jsonl $OUT/r/kn_o.jsonl $OUT/r/kn_trig.jsonl $OUT/r/kn_o.jsonl $OUT/r/kn_ev.jsonl $OUT/r/kn_o.jsonl | tee $OUT/r/pairs_2.txt
  ONLY=conv BATCHES=1 knobs c_n; keep
  ONLY=conv BATCHES=1 knobs c_o $OLD; keep
  BATCHES=1 TONLY=conv torch_sw 2; keep
  for v in pre trig ev o c_n c_o; do python3 benches/device_s24/best.py $OUT/r/kn_$v.jsonl $OUT/r/torch_sw_2.jsonl | tee $OUT/r/best_kn_$v.txt; done
  python3 benches/device_s32/fused_pairs.py $OUT/r/kn_c_n.jsonl $OUT/r/kn_c_o.jsonl | tee $OUT/r/pairs_2c.txt
  keep
  gpu_test gpu_fused_finish gpu_fused_finish_2; keep
  gpu_test gpu_models gpu_models_2; keep
  while [ ! -f /tmp/full/export_avit.log ]; do sleep 2; done  # DynConv is exported first
  for r in 1 2; do
    full_model n_$r dynconv_full_d30; keep
    full_model o_$r dynconv_full_d30 $OLD; keep
  done
elif [ "$stage" = 3 ]; then
  ONLY=conv BATCHES=2,4 knobs c24; keep
  BATCHES=2,4 TONLY=conv torch_sw 3; keep
  python3 benches/device_s24/best.py $OUT/r/kn_c24.jsonl $OUT/r/torch_sw_3.jsonl | tee $OUT/r/best_kn_c24.txt; keep
  mkdir -p /tmp/masks33
  timeout 240 $D/gpu_sparse_bench --backend cuda --batches 1 --only conv --densities 0.3,0.5,1.0 --samples 15 --runs 10 --knobs 4 \
    --dump-masks /tmp/masks33 --json $OUT/r/kn_dens.jsonl > $OUT/r/kn_dens.txt 2>&1
  echo "$(date -u +%T) dens rc=$? wrong=$(grep -c WRONG $OUT/r/kn_dens.txt)"; keep
  timeout 120 python3 benches/gpu_baselines.py --masks /tmp/masks33 --batches 1 --only conv --runs 100 --json $OUT/r/torch_dens.jsonl > /dev/null 2> $OUT/r/torch_dens.err
  python3 benches/device_s24/best.py $OUT/r/kn_dens.jsonl $OUT/r/torch_dens.jsonl | tee $OUT/r/best_kn_dens.txt; keep
elif [ "$stage" = 4 ]; then
  gpu_test gpu_sparse gpu_sparse_4 DYNASPA_SC_TRIGGER=early; keep
  DYNASPA_REQUIRE_BACKENDS=cudnn timeout 100 $D/cuda_selfcheck --repo . > $OUT/r/selfcheck.txt 2>&1
  echo "selfcheck rc=$? PASS=$(grep -c PASS $OUT/r/selfcheck.txt) $(grep -v PASS $OUT/r/selfcheck.txt | tail -2 | tr '\n' ';')"; keep
  for r in 1 2; do
    knobs e_$r DYNASPA_SC_TRIGGER=early; keep
    knobs l_$r; keep
    ONLY=conv BATCHES=1 knobs ce_$r DYNASPA_SC_TRIGGER=early; keep
    ONLY=conv BATCHES=1 knobs cl_$r; keep
  done
  TONLY=conv torch_sw 4; keep
  for v in e_1 l_1 e_2 l_2 ce_1 cl_1 ce_2 cl_2; do python3 benches/device_s24/best.py $OUT/r/kn_$v.jsonl $OUT/r/torch_sw_4.jsonl | tee $OUT/r/best_kn_$v.txt; done
  python3 benches/device_s32/fused_pairs.py $OUT/r/kn_e_1.jsonl $OUT/r/kn_l_1.jsonl $OUT/r/kn_e_2.jsonl $OUT/r/kn_l_2.jsonl $OUT/r/kn_ce_1.jsonl $OUT/r/kn_cl_1.jsonl $OUT/r/kn_ce_2.jsonl $OUT/r/kn_cl_2.jsonl | tee $OUT/r/pairs_4.txt
  keep
fi
