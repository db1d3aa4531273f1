#!/bin/bash
# Session 39 calls (bash benches/device_s39/s.sh N on the GPU host; binaries from
# benches/device_s13/pack.sh with TESTS="gpu_sliced gpu_sparse" in DIST, unpacked to D; the
# landed tree of session 38 in dist-s38e, unpacked to /tmp/old, for the same-host A/B).
#   1 (call 39.1, dist-s39: a self-listing work-group leaves after its last window instead of
#      listing the mask once more to find it has none): gpu_sliced and gpu_sparse on CUDA;
#      conv1x1 at density 0.1, batches 1, 2 and 4: the bench's sample (kn) of the new tree, of
#      the old one and of the new one with DYNASPA_SC_EARLY_TRIGGER=1, alternated, two rounds
#      of samples of 10 frames and one of 100; ONE (one-stage tiles) new and old; PyTorch on the
#      same masks; c1_floor's fastest tiles per batch.
#   2 (call 39.2, dist-s39b: the early trigger a member's knob, the bench's sample with ET
#      variants of the batch-1 and -2 tiles and a 64 x 16 tile of 8 x 4): gpu_sliced on CUDA (an
#      ET member among them); the sample, new tree (three rounds) and old (two), alternated,
#      samples of 10 frames, and one round each of 100; PyTorch on the same masks; conv1x1 at
#      densities 0.3 and 0.5, new and old, with PyTorch on those masks.
#   3 (call 39.3, dist-s39c: the landed tree): the bench's sample in samples of 10 frames (two
#      rounds) and 100, PyTorch on the same masks, on a fresh host; then on CUDA the GPU tests
#      of the issue's correctness points (gpu_sliced, gpu_sparse, gpu_models, onnx_node).
#   4 (call 39.4, dist-s39c): the other GPU tests on CUDA (gpu_fused_finish, gpu_ops,
#      gpu_frame_graphs, gpu_tokens).
#   5 (call 39.5, dist-s39c): the node suite and the shipped models on CUDA with their counts and
#      errors printed (--nocapture).
stage=$1
case $stage in
  1) DIST=${DIST:-dist-s39} D=${D:-/tmp/d39} ;;
  2) DIST=${DIST:-dist-s39b} D=${D:-/tmp/d39b} ;;
  *) DIST=${DIST:-dist-s39c} D=${D:-/tmp/d39c} ;;
esac
source "$(dirname "$0")/../device_s37/start.sh"
NEW=$D
unold() {
  mkdir -p /tmp/old
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" dist-s38e/gpu_sparse_bench.xz /tmp/old/gpu_sparse_bench && chmod +x /tmp/old/gpu_sparse_bench
}
echo "$(date -u +%T) start"
if [ "$stage" = 1 ]; then
  unold
  gpu_test gpu_sliced sliced_1; gpu_test gpu_sparse sparse_1; keep
  for r in 1 2; do
    D=$NEW RUNS=10 kn new_$r; D=/tmp/old RUNS=10 kn old_$r; D=$NEW RUNS=10 kn et_$r DYNASPA_SC_EARLY_TRIGGER=1; keep
  done
  D=$NEW RUNS=100 kn new_r100; D=/tmp/old RUNS=100 kn old_r100; D=$NEW RUNS=100 kn et_r100 DYNASPA_SC_EARLY_TRIGGER=1; keep
  ONE="m64n8k256_w4x4_s1_wk8,m32n8k256_w2x4_s1_wk8,m64n16k256_w4x4_s1_wk4,m32n16k256_w4x4_s1_wk8,m64n16k256_w8x4_s1_wk8"
  SPLIT="m128n32k16_w4x4_s6"
  for r in 1 2; do D=$NEW one new_$r; D=/tmp/old one old_$r; D=$NEW one et_$r DYNASPA_SC_EARLY_TRIGGER=1; keep; done
  members | tee $OUT/r/members.txt
  torch_sw 1; keep
  for f in $OUT/r/kn_*.jsonl; do
    v=$(basename $f .jsonl); echo "== $v"; python3 benches/device_s24/best.py $f $OUT/r/torch_sw_1.jsonl | tee $OUT/r/best_$v.txt | tail -3
  done
  keep
  FLOORS="1:co64_ct8_w8 2:co64_ct8_w8 4:co32_ct16_w8 4:co64_ct16_w8" floors
elif [ "$stage" = 2 ]; then
  unold
  gpu_test gpu_sliced sliced_2; keep
  for r in 1 2 3; do
    D=$NEW RUNS=10 kn new_$r; [ $r -le 2 ] && D=/tmp/old RUNS=10 kn old_$r; keep
  done
  D=$NEW RUNS=100 kn new_r100; D=/tmp/old RUNS=100 kn old_r100; keep
  torch_sw 2; keep
  for f in $OUT/r/kn_*.jsonl; do
    v=$(basename $f .jsonl); echo "== $v"; python3 benches/device_s24/best.py $f $OUT/r/torch_sw_2.jsonl | tee $OUT/r/best_$v.txt | tail -3
  done
  keep
  # conv1x1 at densities 0.3 and 0.5: masks of their own directory.
  for v in new old; do
    [ $v = new ] && B=$NEW || B=/tmp/old
    mkdir -p /tmp/masks35
    timeout 200 $B/gpu_sparse_bench --backend cuda --batches 1,2,4 --only conv1x1 --densities 0.3,0.5 --samples 15 --runs 10 --knobs 12 \
      --dump-masks /tmp/masks35 --json $OUT/r/d35_$v.jsonl > $OUT/r/d35_$v.txt 2>&1
    echo "$(date -u +%T) d35 $v rc=$? wrong=$(grep -c WRONG $OUT/r/d35_$v.txt)"
  done
  timeout 120 python3 benches/gpu_baselines.py --masks /tmp/masks35 --batches 1,2,4 --only conv1x1 --runs 100 \
    --json $OUT/r/torch_d35.jsonl > /dev/null 2> $OUT/r/torch_d35.err
  for v in new old; do echo "== d35 $v"; python3 benches/device_s24/best.py $OUT/r/d35_$v.jsonl $OUT/r/torch_d35.jsonl | tee $OUT/r/best_d35_$v.txt | tail -6; done
  keep
elif [ "$stage" = 3 ]; then
  RUNS=10 kn l_1; RUNS=10 kn l_2; RUNS=100 kn l_r100; keep
  torch_sw 3; keep
  for v in l_1 l_2 l_r100; do
    echo "== $v"; python3 benches/device_s24/best.py $OUT/r/kn_$v.jsonl $OUT/r/torch_sw_3.jsonl | tee $OUT/r/best_kn_$v.txt | tail -3
  done
  keep
  gpu_test gpu_sliced sliced_3; gpu_test gpu_sparse sparse_3; keep
  for t in gpu_models onnx_node; do
    DYNASPA_REQUIRE_BACKENDS=cuda timeout 180 $D/t_$t --test-threads 4 > $OUT/r/test_${t}_3.txt 2>&1
    echo "$(date -u +%T) test $t rc=$? $(grep '^test result' $OUT/r/test_${t}_3.txt | tail -1)"
    grep -E "panicked" -A 2 $OUT/r/test_${t}_3.txt | head -6 | cut -c1-300
    keep
  done
elif [ "$stage" = 5 ]; then
  for t in onnx_node gpu_models; do
    DYNASPA_REQUIRE_BACKENDS=cuda timeout 180 $D/t_$t --test-threads 4 --nocapture > $OUT/r/test_${t}_5.txt 2>&1
    echo "$(date -u +%T) test $t rc=$?"; grep -E "onnx node suite|excluded x|relative L2|test result" $OUT/r/test_${t}_5.txt | head -40
  done
  keep
elif [ "$stage" = 4 ]; then
  for t in gpu_fused_finish gpu_ops gpu_frame_graphs gpu_tokens; do gpu_test $t ${t}_4; keep; done
fi
echo "$(date -u +%T) end"
