# Sourced first by the session-17 device scripts: session 13's start with pack.sh's binaries
# (dist-s17) unpacked into /tmp/d17, session 16's (dist-s16, 33517cf: what landed) into $OLD,
# session 15's helpers (PyTorch baselines, gpu_vs_torch, packing the results) and the bench
# rounds below.
DIST=dist-s17 D=/tmp/d17 BUILD_DIR=/work/main
source "$(dirname "${BASH_SOURCE[0]}")/../device_s13/start.sh"
( DIST=dist-s16 D=/tmp/d16; source benches/device_s7/common.sh ) ; OLD=/tmp/d16
source "$(dirname "${BASH_SOURCE[0]}")/../device_s15/helpers.sh"

# One bench of the issue-5 ops with the binaries in DIR and the environment NAME=VALUE..., its
# results in $OUT/r/KIND_TAG.{txt,jsonl}: bench KIND TAG DIR [NAME=VALUE...]. KIND: b1 (the
# convs at batch 1, sampled knobs), b24 (batches 2 and 4, default members), avit (A-ViT's token
# ops). With DUMP=1 the masks go to /tmp/masks1, /tmp/masks24 or /tmp/avm for PyTorch.
bench() {
  local kind=$1 tag=$2 b=$3 args dump limit; shift 3
  case $kind in
    b1) args="--batches 1 --only conv --knobs 12 --densities 0.1,0.3,0.5"; dump=/tmp/masks1; limit=150;;
    b24) args="--batches 2,4 --only conv --densities 0.1,0.3,0.5"; dump=/tmp/masks24; limit=100;;
    avit) args="--avit --batches 1"; dump=/tmp/avm; limit=80;;
  esac
  mkdir -p $dump
  env "$@" timeout $limit $b/gpu_sparse_bench --backend cuda $args --samples 15 --runs 10 ${DUMP:+--dump-masks $dump} \
    --json $OUT/r/${kind}_$tag.jsonl > $OUT/r/${kind}_$tag.txt 2>&1
  echo "$(date -u +%T) $kind $tag rc=$? wrong=$(grep -c WRONG $OUT/r/${kind}_$tag.txt)"
}
