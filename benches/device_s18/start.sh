# Sourced first by the session-18 device scripts: session 13's start with pack.sh's binaries
# (dist-s18) unpacked into /tmp/d18, session 15's helpers and session 17's bench functions
# (bench, torch_b1, vs_rep), here with a backend: BACKEND=opencl runs NVIDIA's OpenCL.
DIST=${DIST:-dist-s18} D=${D:-/tmp/d18} BUILD_DIR=/work/main
source "$(dirname "${BASH_SOURCE[0]}")/../device_s13/start.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../device_s15/helpers.sh"

# One bench of the issue-5 ops with the binaries in DIR and the environment NAME=VALUE..., its
# results in $OUT/r/KIND_TAG.{txt,jsonl}: bench KIND TAG DIR [NAME=VALUE...]. KIND: b1 (the
# convs at batch 1, sampled knobs), b24 (batches 2 and 4, default members), b24k (batches 2 and
# 4, sampled knobs). With DUMP=1 the
# masks go to /tmp/masks1 or /tmp/masks24 for PyTorch.
bench() {
  local kind=$1 tag=$2 b=$3 args dump limit be=${BACKEND:-cuda}; shift 3
  case $kind in
    b1) args="--batches 1 --only conv --knobs 12 --densities 0.1,0.3,0.5"; dump=/tmp/masks1; limit=150;;
    b24) args="--batches 2,4 --only conv --densities 0.1,0.3,0.5"; dump=/tmp/masks24; limit=100;;
    b24k) args="--batches 2,4 --only conv --knobs 12 --densities 0.1,0.3,0.5"; dump=/tmp/masks24; limit=280;;
  esac
  limit=${LIMIT:-$limit}
  [ $be = opencl ] && args="$args --device NVIDIA"
  mkdir -p $dump
  env "$@" timeout $limit $b/gpu_sparse_bench --backend $be $args --samples 15 --runs 10 ${DUMP:+--dump-masks $dump} \
    --json $OUT/r/${kind}_$tag.jsonl > $OUT/r/${kind}_$tag.txt 2>&1
  rc=$?; echo "$(date -u +%T) $kind $tag rc=$rc wrong=$(grep -c WRONG $OUT/r/${kind}_$tag.txt)"
}
torch_b1() {
  timeout 80 python3 benches/gpu_baselines.py --masks /tmp/masks1 --batches 1 --runs 100 --json $OUT/r/torch_b1_$1.jsonl > /dev/null 2> $OUT/r/torch_b1_$1.err
  echo "torch b1 $1 rc=$?"
}
torch_b24() {
  timeout 80 python3 benches/gpu_baselines.py --masks /tmp/masks24 --batches 2,4 --runs 100 --json $OUT/r/torch_b24_$1.jsonl > /dev/null 2> $OUT/r/torch_b24_$1.err
  echo "torch b24 $1 rc=$?"
}
# Bench KIND_V_REP against torch_KIND_REP into vs_KIND_V_REP.txt: vs_rep KIND REP V...
vs_rep() {
  local k=$1 r=$2 v; shift 2
  for v in "$@"; do python3 benches/gpu_vs_torch.py $OUT/r/${k}_${v}_$r.jsonl $OUT/r/torch_${k}_$r.jsonl > $OUT/r/vs_${k}_${v}_$r.txt; done
}
