# Sourced first by the session-30 device scripts: session 29's start (bench, bench_lo, best,
# pairs, torch_b1, torch_b24, gpu_test, half) with this session's binaries (dist-s30) in /tmp/d30.
DIST=${DIST:-dist-s30} D=${D:-/tmp/d30}
source "$(dirname "${BASH_SOURCE[0]}")/../device_s29/start.sh"
# Call 30.1's binaries: self-listing grids with column tiles for 15% of the positions (the
# work-groups take further windows where the map has more columns). Calls 30.2 and on: grids
# for every position (the switch of dist-s30b, whose grids follow each frame's counts).
G15="DYNASPA_SL_GRID=0.15"
OFF="DYNASPA_SL_GRID=0"
# A batch-2-and-4 bench of ONLY (sampled knobs, as session 29's stage 6) with NAME=VALUE...,
# into $OUT/r/b24k_TAG.{txt,jsonl}, DUMP=1 dumping its masks: b24 TAG [NAME=VALUE...]
b24() {
  local tag=$1; shift
  mkdir -p /tmp/masks24
  env "$@" timeout ${LIMIT:-150} $D/gpu_sparse_bench --backend cuda --batches 2,4 --only ${ONLY:-conv} --knobs 12 --densities 0.1 \
    --samples 15 --runs 10 ${DUMP:+--dump-masks /tmp/masks24} --json $OUT/r/b24k_$tag.jsonl > $OUT/r/b24k_$tag.txt 2>&1
  rc=$?; echo "$(date -u +%T) b24k $tag rc=$rc wrong=$(grep -c WRONG $OUT/r/b24k_$tag.txt)"
}
