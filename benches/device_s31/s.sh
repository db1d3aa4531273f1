#!/bin/bash
# Session 31 calls (bash s.sh N on the GPU host; binaries from benches/device_s13/pack.sh).
#   1 (call 31.1, DIST=dist-s31: cluster_finish.patch and the SL_EARLY warp sum): "cl", the
#      binaries' defaults (split members of 2-8 working splits whose partial tile fits in
#      shared memory add up their splits in a thread-block cluster, no finish launch) against
#      "nocl" (DYNASPA_SC_CLUSTER=0): gpu_sparse and gpu_fused_finish on CUDA with cl; conv1x1 at
#      batches 2 and 4 and 0.1, cl then nocl; PyTorch on the same masks.
#   2 (call 31.2, DIST=dist-s31b D=/tmp/d31b: the clusters taken out, the warp sum kept behind
#      DYNASPA_SL_WARP=0; --schedules and DYNASPA_NVRTC_LINEINFO in the bench): SL_EARLY's count
#      once per warp ("warp") against once per work-item ("nowarp", session 30's), conv1x1 and
#      conv3x3 at batch 1 and 0.1, alternated; gpu_sparse. Then Nsight Compute with line tables
#      on conv1x1 at batch 4 and 0.1, two members alone (64 x 64 KS 4, 128 x 64 KS 14, which
#      runs 8): details of every GEMM and finish launch, and for each member's GEMM its SASS
#      with stall samples (ncu_pick.py finds its launch by grid).
#   3 (call 31.3, DIST=dist-s31c D=/tmp/d31c: sl_shfl.patch): the shuffled scan ("shfl", the
#      binaries' default) against session 30's SL_EARLY count and shared-memory scan ("noshfl",
#      DYNASPA_SL_SHFL=0): gpu_sparse; conv1x1 at batches 2 and 4, then at batch 1 twice; PyTorch.
# Both patches apply to 73e1dd7 (cluster_finish needs d69c5f2's kernel-name parser, which reads
# the cluster shape between the register bound and the kernel's name).
stage=$1
source "$(dirname "$0")/start.sh"
keep() { (cd $OUT && tar czf r_$stage.tgz r); }
if [ "$stage" = 1 ]; then
  gpu_test gpu_sparse gpu_sparse_1; keep
  gpu_test gpu_fused_finish gpu_fused_finish_1; keep
  ONLY=conv1x1 LIMIT=${L1:-200} DUMP=1 b24 c1_cl; keep
  ONLY=conv1x1 LIMIT=${L1:-150} b24 c1_nocl $NOCL; keep
  cp $OUT/r/b24k_c1_cl.jsonl $OUT/r/b24k_cl_1.jsonl; cp $OUT/r/b24k_c1_nocl.jsonl $OUT/r/b24k_nocl_1.jsonl
  torch_b24 1; cp $OUT/r/torch_b24_1.jsonl $OUT/r/torch_b24k_1.jsonl
  for v in cl nocl; do best b24k $v 1; done
  pairs b24_1 b24k_cl_1 b24k_nocl_1
  keep
elif [ "$stage" = 2 ]; then
  gpu_test gpu_sparse gpu_sparse_2; keep
  for r in 1 2; do
    ONLY=conv1x1 LIMIT=${L2:-150} bench_lo c1_warp_$r $D; keep
    ONLY=conv1x1 LIMIT=90 bench_lo c1_nowarp_$r $D $NOWARP; keep
    L2=90
  done
  ONLY=conv3x3 LIMIT=150 bench_lo c3_warp $D; keep
  ONLY=conv3x3 LIMIT=120 bench_lo c3_nowarp $D $NOWARP; keep
  pairs warp_2 b1lo_c1_warp_1 b1lo_c1_nowarp_1 b1lo_c1_warp_2 b1lo_c1_nowarp_2 b1lo_c3_warp b1lo_c3_nowarp
  keep
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  args="--backend cuda --batches 4 --only conv1x1 --densities 0.1 --samples 1 --runs 1 --schedules m64n64k16_w4x4_s4,m128n64k16_w8x4_s14"
  export DYNASPA_NVRTC_LINEINFO=1
  timeout 90 $D/gpu_sparse_bench $args > $OUT/r/ncu_warm_2.txt 2>&1; echo "warm rc=$?"
  timeout 300 $NCU --cache-control none --clock-control none -k regex:'sconv_(gemm|finish)_f32' --launch-count 200 \
    --section SpeedOfLight --section LaunchStats --section WarpStateStats --section Occupancy --section SourceCounters \
    -o /tmp/ncu2 $D/gpu_sparse_bench $args > $OUT/r/ncu_run_2.txt 2>&1
  echo "ncu rc=$? $(ls -la /tmp/ncu2.ncu-rep)"
  $NCU --import /tmp/ncu2.ncu-rep --csv --page details > $OUT/r/ncu_details_2.csv 2> $OUT/r/ncu_details_2.err
  keep
  # 128 x 64 at KS 14 runs 8 splits (chunks of 32 of the 256 channels).
  for m in "64:(4, 16,:(16, 16, 1)" "128:(2, 32,:(16, 16, 1)"; do
    IFS=: read tag grid block <<< "$m"
    id=$(python3 benches/device_s31/ncu_pick.py $OUT/r/ncu_details_2.csv "$grid" "$block" | tail -1)
    echo "member $tag grid $grid: launch $id"
    [ -n "$id" ] && $NCU --import /tmp/ncu2.ncu-rep --csv --page source --print-source sass --launch-skip $id --launch-count 1 \
      > $OUT/r/ncu_sass_$tag.csv 2> $OUT/r/ncu_sass_$tag.err
    echo "sass $tag rc=$? lines=$(wc -l < $OUT/r/ncu_sass_$tag.csv)"
    keep
  done
elif [ "$stage" = 3 ]; then
  gpu_test gpu_sparse gpu_sparse_3; keep
  ONLY=conv1x1 LIMIT=${L3:-150} DUMP=1 b24 c1_shfl; keep
  ONLY=conv1x1 LIMIT=100 b24 c1_noshfl DYNASPA_SL_SHFL=0; keep
  cp $OUT/r/b24k_c1_shfl.jsonl $OUT/r/b24k_shfl_3.jsonl; cp $OUT/r/b24k_c1_noshfl.jsonl $OUT/r/b24k_noshfl_3.jsonl
  torch_b24 3; cp $OUT/r/torch_b24_3.jsonl $OUT/r/torch_b24k_3.jsonl
  for v in shfl noshfl; do best b24k $v 3; done
  pairs b24_3 b24k_shfl_3 b24k_noshfl_3
  keep
  for r in 1 2; do
    ONLY=conv1x1 LIMIT=90 DUMP=1 bench_lo c1_shfl_$r $D; keep
    ONLY=conv1x1 LIMIT=60 bench_lo c1_noshfl_$r $D DYNASPA_SL_SHFL=0; keep
  done
  torch_b1 3; cp $OUT/r/torch_b1_3.jsonl $OUT/r/torch_b1lo_3.jsonl
  for v in c1_shfl_1 c1_noshfl_1 c1_shfl_2 c1_noshfl_2; do cp $OUT/r/b1lo_$v.jsonl $OUT/r/b1lo_${v}_3.jsonl; best b1lo $v 3; done
  pairs c1_3 b1lo_c1_shfl_1 b1lo_c1_noshfl_1 b1lo_c1_shfl_2 b1lo_c1_noshfl_2
  keep
fi
exit 0
