# Sourced first by the session-26 device scripts: session 25's start (bench, best, pairs,
# torch_b1, gpu_test, full_model) with this session's binaries (dist-s26) in /tmp/d26.
DIST=${DIST:-dist-s26} D=${D:-/tmp/d26}
source "$(dirname "${BASH_SOURCE[0]}")/../device_s25/start.sh"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
# The first 80 sparse GEMM launches of one bench (batch 1, density D, op OP, the deterministic
# sample and one random schedule) under Nsight Compute, caches and clocks left alone, as CSV:
# ncu_op TAG OP D [NAME=VALUE...]. Call Z6's command; Z5 (every GEMM and finish launch, up to 500)
# ran out of time on a fresh host, compiling its programs under the profiler.
ncu_op() {
  local tag=$1 op=$2 d=$3; shift 3
  env "$@" timeout 240 $NCU --cache-control none --clock-control none -k regex:'sconv_gemm_f32' --launch-count 80 \
    --section SpeedOfLight --section LaunchStats --section WarpStateStats --section Occupancy \
    --csv --page details \
    $D/gpu_sparse_bench --backend cuda --batches 1 --only $op --knobs 1 --densities $d --samples 1 --runs 1 \
    --json $OUT/r/ncu_$tag.jsonl > $OUT/r/ncu_$tag.csv 2> $OUT/r/ncu_$tag.err
  rc=$?; echo "$(date -u +%T) ncu $tag rc=$rc rows=$(wc -l < $OUT/r/ncu_$tag.csv)"
}
