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
  rc=$?; echo "$(date -u +%T) $kind $tag rc=$rc wrong=$(grep -c WRONG $OUT/r/${kind}_$tag.txt)"
}

# PyTorch on the batch-1 masks (/tmp/masks1) into $OUT/r/torch_b1_REP.jsonl: torch_b1 REP.
torch_b1() {
  timeout 80 python3 benches/gpu_baselines.py --masks /tmp/masks1 --batches 1 --runs 100 --json $OUT/r/torch_b1_$1.jsonl > /dev/null 2> $OUT/r/torch_b1_$1.err
  echo "torch $1 rc=$?"
}
# Each b1_V_REP bench against torch_b1_REP into vs_b1_V_REP.txt: vs_rep REP V...
vs_rep() {
  local r=$1 v; shift
  for v in "$@"; do python3 benches/gpu_vs_torch.py $OUT/r/b1_${v}_$r.jsonl $OUT/r/torch_b1_$r.jsonl > $OUT/r/vs_b1_${v}_$r.txt; done
}
# Three rounds of PyTorch, then the batch-1 convs with the binaries in DIR1 (b1_V1_REP) and in
# DIR2 with the environment NAME=VALUE... (b1_V2_REP), each against its round's PyTorch:
# b1_rounds V1 DIR1 V2 DIR2 [NAME=VALUE...]
b1_rounds() {
  local v1=$1 d1=$2 v2=$3 d2=$4 rep; shift 4
  for rep in 1 2 3; do
    torch_b1 $rep
    bench b1 ${v1}_$rep $d1
    bench b1 ${v2}_$rep $d2 "$@"
    vs_rep $rep $v1 $v2
  done
}
