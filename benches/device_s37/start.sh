# Sourced first by the session-37 and later device scripts: session 35's start (gpu_test,
# torch_sw, knobs) and session 37's one, kn and floors, with the binaries of DIST unpacked in D.
source "$(dirname "${BASH_SOURCE[0]}")/../device_s35/start.sh"
keep() { (cd $OUT && tar czf r_$stage.tgz r); }
# One-stage tiles (TK 256 holds conv1x1's reduction of 256; at most 48 KiB of local memory).
ONE="m32n8k256_w2x4_s1_wk8,m32n8k256_w4x4_s1_wk16,m32n8k256_w1x4_s1_wk4,m32n8k256_w2x4_s1_wk16,m16n8k256_w2x4_s1_wk16,m16n8k256_w1x4_s1_wk8,m16n16k256_w2x4_s1_wk8,m16n16k256_w4x4_s1_wk16,m16n16k256_w2x4_s1_wk16,m8n16k256_w2x4_s1_wk16"
# The split and sliced members that ran it fastest in sessions 32-36.
SPLIT="m64n64k16_w4x4_s10,m64n32k16_w4x2_s6,m128n32k16_w8x4_s6,m64n64k16_w4x4_s12,m32n8k64_w2x4_s1_wk8"
one() {
  local tag=$1; shift
  mkdir -p /tmp/masks32
  env "$@" timeout ${LIMIT:-150} $D/gpu_sparse_bench --backend cuda --batches ${BATCHES:-1,2,4} --only conv1x1 --densities 0.1 \
    --samples 15 --runs ${RUNS:-10} --schedules "$ONE,$SPLIT" --dump-masks /tmp/masks32 --json $OUT/r/one_$tag.jsonl > $OUT/r/one_$tag.txt 2>&1
  echo "$(date -u +%T) one $tag rc=$? wrong=$(grep -c WRONG $OUT/r/one_$tag.txt) $(grep -h '^built' $OUT/r/one_$tag.txt | head -1)"
}
# The bench's own sample (--knobs 12) in samples of RUNS frames, masks dumped, into
# $OUT/r/kn_TAG.{txt,jsonl}: kn TAG [NAME=VALUE...]
kn() {
  local tag=$1; shift
  mkdir -p /tmp/masks32
  env "$@" timeout 200 $D/gpu_sparse_bench --backend cuda --batches 1,2,4 --only conv1x1 --densities 0.1 \
    --samples 15 --runs ${RUNS:-10} --knobs 12 --dump-masks /tmp/masks32 --json $OUT/r/kn_$tag.jsonl > $OUT/r/kn_$tag.txt 2>&1
  echo "$(date -u +%T) knobs $tag rc=$? wrong=$(grep -c WRONG $OUT/r/kn_$tag.txt)"
}
# c1_floor's tiles FLOORS (batch:variant ..., the best per batch unless set) on the masks dumped
# above: floors
floors() {
  nvcc -O2 -arch=sm_90 -o /tmp/c1_floor benches/device_s36/c1_floor.cu 2>&1 | grep -v Wno-deprecated | tail -5
  for bv in ${FLOORS:-1:co64_ct8_w8 1:co32_ct8_w8 2:co64_ct8_w8 4:co32_ct16_w8}; do
    b=${bv%%:*} v=${bv#*:}
    timeout 60 /tmp/c1_floor /tmp/masks32/d0.10_b$b.npy 1000 $v > $OUT/r/c1_floor_b${b}_$v.txt 2>&1; echo "b$b $v"; grep -A2 RIGHT $OUT/r/c1_floor_b${b}_$v.txt | head -3
  done
  keep
}
# Per-member µs of the one_*.jsonl files in $OUT/r, a line per file: members
members() {
  python3 - $OUT/r <<'PY'
import json, sys, glob, os
for f in sorted(glob.glob(sys.argv[1] + "/one_*.jsonl")):
    rows = [json.loads(l) for l in open(f)]
    print(os.path.basename(f), " ".join(f"b{d['batch']}:{d['member'].replace('tiles1x1_', '')}={d['us']:.2f}" for d in rows if "_" in d["member"]))
PY
}
