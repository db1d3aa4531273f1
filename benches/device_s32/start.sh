# Sourced first by the session-32 device scripts: session 31's start (bench_lo, b24, best, pairs,
# torch_b1, torch_b24, gpu_test) with this session's binaries (dist-s32) in /tmp/d32.
DIST=${DIST:-dist-s32} D=${D:-/tmp/d32}
source "$(dirname "${BASH_SOURCE[0]}")/../device_s31/start.sh"
# conv1x1 at density 0.1 and batches 1, 2 and 4 over session 32's sweep SWEEP (sched.py; BARGS more
# bench arguments) with NAME=VALUE..., its masks dumped to /tmp/masks32, into $OUT/r/sw_TAG.{txt,jsonl}: sweep TAG [NAME=VALUE...]
sweep() {
  local tag=$1; shift
  mkdir -p /tmp/masks32
  env "$@" timeout ${LIMIT:-300} $D/gpu_sparse_bench --backend cuda --batches ${BATCHES:-1,2,4} --only conv1x1 --densities 0.1 \
    --samples 15 --runs 10 --schedules "$(python3 benches/device_s32/sched.py ${SWEEP:-1})" ${BARGS:-} --dump-masks /tmp/masks32 \
    --json $OUT/r/sw_$tag.jsonl > $OUT/r/sw_$tag.txt 2>&1
  rc=$?; echo "$(date -u +%T) sweep $tag rc=$rc wrong=$(grep -c WRONG $OUT/r/sw_$tag.txt) $(grep -h '^built' $OUT/r/sw_$tag.txt | tr '\n' ';')"
}
# PyTorch's conv1x1 on sweep's masks: torch_sw TAG
torch_sw() {
  timeout 120 python3 benches/gpu_baselines.py --masks /tmp/masks32 --batches ${BATCHES:-1,2,4} --only ${TONLY:-conv1x1} --runs 100 \
    --json $OUT/r/torch_sw_$1.jsonl > /dev/null 2> $OUT/r/torch_sw_$1.err
  echo "$(date -u +%T) torch sw $1 rc=$?"
}
# gpu_sparse_bench's own sample (--knobs 12) over ONLY (conv1x1 unless set) at density 0.1 and
# BATCHES (1,2,4) with NAME=VALUE..., masks dumped to /tmp/masks32, into $OUT/r/kn_TAG.{txt,jsonl}: knobs TAG [NAME=VALUE...]
knobs() {
  local tag=$1; shift
  mkdir -p /tmp/masks32
  env "$@" timeout ${LIMIT:-200} $D/gpu_sparse_bench --backend cuda --batches ${BATCHES:-1,2,4} --only ${ONLY:-conv1x1} --densities 0.1 \
    --samples 15 --runs 10 --knobs 12 --dump-masks /tmp/masks32 --json $OUT/r/kn_$tag.jsonl > $OUT/r/kn_$tag.txt 2>&1
  rc=$?; echo "$(date -u +%T) knobs $tag rc=$rc wrong=$(grep -c WRONG $OUT/r/kn_$tag.txt) $(grep -h '^built' $OUT/r/kn_$tag.txt | head -1)"
}
