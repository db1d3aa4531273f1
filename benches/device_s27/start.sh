# Sourced first by the session-27 device scripts: session 26's start (bench, best, pairs,
# torch_b1, torch_b24, gpu_test, full_model, ncu_op) with this session's binaries (dist-s27) in
# /tmp/d27.
DIST=${DIST:-dist-s27} D=${D:-/tmp/d27}
source "$(dirname "${BASH_SOURCE[0]}")/../device_s26/start.sh"
# Session 26's self-listing members: the finish in a second launch, the bitmask launch beside.
OLD_SL="DYNASPA_SL_FUSED=0 DYNASPA_SELF_COUNT=0"
# conv1x1 alone (sampled knobs, as bench b1) at batch 1, or 2 and 4 with KIND=b24, with
# NAME=VALUE..., into $OUT/r/KIND_TAG.{txt,jsonl} (so `best KIND TAG REP` reads it); DUMP=1
# dumps its masks for PyTorch as bench does: c1 TAG [NAME=VALUE...]
c1() {
  local tag=$1 kind=${KIND:-b1} batches=1 dump=/tmp/masks1; shift
  [ $kind = b24 ] && batches=2,4 dump=/tmp/masks24
  mkdir -p $dump
  env "$@" timeout ${LIMIT:-90} $D/gpu_sparse_bench --backend ${BACKEND:-cuda} --batches $batches --only conv1x1 --knobs 12 \
    --densities 0.1,0.3,0.5 --samples 15 --runs 10 ${DUMP:+--dump-masks $dump} --json $OUT/r/${kind}_$tag.jsonl > $OUT/r/${kind}_$tag.txt 2>&1
  rc=$?; echo "$(date -u +%T) c1 $kind $tag rc=$rc wrong=$(grep -c WRONG $OUT/r/${kind}_$tag.txt)"
}
