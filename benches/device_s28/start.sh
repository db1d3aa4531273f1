# Sourced first by the session-28 device scripts: session 27's start (bench, best, pairs,
# torch_b1, torch_b24, gpu_test, c1) with this session's binaries (dist-s28) in /tmp/d28.
DIST=${DIST:-dist-s28} D=${D:-/tmp/d28}
source "$(dirname "${BASH_SOURCE[0]}")/../device_s27/start.sh"
# Split GEMMs that add their splits with float atomics and finish in their last work-group
# (ATOMIC_FINISH), against the tree's default finish (CUDA: a second launch; NVIDIA's OpenCL:
# fused where the tile is small enough, else a second launch).
AT="DYNASPA_ATOMIC_FINISH=1"
NOAT="DYNASPA_ATOMIC_FINISH=0"
# The convs (ONLY=NAME: those whose name holds NAME) at batch 1 and density 0.1 alone (sampled knobs, as bench b1) with the binaries in
# DIR and NAME=VALUE..., DUMP=1 dumping the masks for PyTorch, BARGS more bench arguments, into $OUT/r/b1lo_TAG.{txt,jsonl}: bench_lo TAG DIR [NAME=VALUE...]
bench_lo() {
  local tag=$1 b=$2; shift 2
  mkdir -p /tmp/masks1
  env "$@" timeout ${LIMIT:-100} $b/gpu_sparse_bench --backend ${BACKEND:-cuda} --batches 1 --only ${ONLY:-conv} --knobs 12 \
    --densities 0.1 --samples 15 --runs 10 ${BARGS:-} ${DUMP:+--dump-masks /tmp/masks1} --json $OUT/r/b1lo_$tag.jsonl > $OUT/r/b1lo_$tag.txt 2>&1
  rc=$?; echo "$(date -u +%T) b1lo $tag rc=$rc wrong=$(grep -c WRONG $OUT/r/b1lo_$tag.txt)"
}
# conv1x1 at batch 1 and density 0.5 alone (sampled knobs) with the binaries in DIR and
# NAME=VALUE..., into $OUT/r/h_TAG.{txt,jsonl}, for member-by-member A/Bs: half TAG DIR [NAME=VALUE...]
half() {
  local tag=$1 b=$2; shift 2
  env "$@" timeout ${LIMIT:-35} $b/gpu_sparse_bench --backend cuda --batches 1 --only conv1x1 --knobs 12 --densities 0.5 \
    --samples 15 --runs 10 --json $OUT/r/h_$tag.jsonl > $OUT/r/h_$tag.txt 2>&1
  rc=$?; echo "$(date -u +%T) h $tag rc=$rc wrong=$(grep -c WRONG $OUT/r/h_$tag.txt)"
}
