# Sourced first by the session-35 device scripts: session 33's start (knobs, torch_sw, gpu_test,
# full_model, best.py, fused_pairs.py) with this session's binaries (dist-s35) in /tmp/d35.
DIST=${DIST:-dist-s35} D=${D:-/tmp/d35}
source "$(dirname "${BASH_SOURCE[0]}")/../device_s33/start.sh"
# Calls 1 and 2 (dist-s35, the tree with late_wait.patch): the self-listing GEMM's wait just before its first stages' inputs (SL_PREWAIT=2), against
# session 33's wait after the listing (SL_PREWAIT=1, the binaries' default).
LATE="DYNASPA_SL_PREWAIT=2"
LIST="DYNASPA_SL_PREWAIT=1"
# conv1x1 at density 0.1 over sched.py's members at BATCHES with NAME=VALUE..., masks dumped to
# /tmp/masks32 (torch_sw's), into $OUT/r/sw_TAG.{txt,jsonl}: sweep35 TAG [NAME=VALUE...]
sweep35() {
  local tag=$1; shift
  mkdir -p /tmp/masks32
  env "$@" timeout ${LIMIT:-200} $D/gpu_sparse_bench --backend cuda --batches ${BATCHES:-1} --only conv1x1 --densities 0.1 \
    --samples 15 --runs 10 --schedules "$(python3 benches/device_s35/sched.py)" --dump-masks /tmp/masks32 \
    --json $OUT/r/sw_$tag.jsonl > $OUT/r/sw_$tag.txt 2>&1
  rc=$?; echo "$(date -u +%T) sweep $tag rc=$rc wrong=$(grep -c WRONG $OUT/r/sw_$tag.txt) $(grep -h '^built' $OUT/r/sw_$tag.txt | tr '\n' ';')"
}
