# Sourced first by the session-23 device scripts: session 22's start (bench, torch_b1, vs_rep,
# gpu_test, full_model) with this session's binaries (dist-s23) in /tmp/d23; with SIGE=1 the
# full-size SIGE generator exported in the background into /tmp/full (done: /tmp/full/sige_done)
# with its edit mask (density 0.3, discs) in /tmp/sige_mask.npy.
DIST=${DIST:-dist-s23} D=${D:-/tmp/d23}
source "$(dirname "${BASH_SOURCE[0]}")/../device_s22/start.sh"
if [ -n "${SIGE:-}" ]; then
  mkdir -p /tmp/full
  ( timeout 200 python3 models/sige.py --sizes full --no-dataset --out /tmp/full > /tmp/full/export_sige.log 2>&1
    python3 benches/device_s22/sige_mask.py /tmp/sige_mask.npy
    touch /tmp/full/sige_done ) &
fi
# `dynaspa profile` of the full-size SIGE on CUDA over 10 vtest frames with NAME=VALUE..., into
# $OUT/r/prof_TAG.txt: sige_profile TAG [--nodes N] [NAME=VALUE...] (options before variables)
sige_profile() {
  local tag=$1; shift; local opts=()
  while [ $# -gt 0 ] && [[ $1 == --* ]]; do opts+=("$1" "$2"); shift 2; done
  env "$@" timeout 150 $D/dynaspa profile /tmp/full/sige_full.onnx --frames models/frames/vtest --max-frames 10 --backend cuda --input mask=/tmp/sige_mask.npy "${opts[@]}" > $OUT/r/prof_$tag.txt 2>&1
  echo "profile $tag rc=$?"
}
# The full-size SIGE end to end (`dynaspa bench`, 20 vtest frames, 5 rounds) with the dynaspa in
# DIR on BACKEND, into $OUT/r/sige_TAG.txt, its median and agreement lines echoed:
# sige_bench TAG DIR BACKEND [OPTION...]
sige_bench() {
  local tag=$1 b=$2 be=$3; shift 3
  timeout 150 $b/dynaspa bench /tmp/full/sige_full.onnx --frames models/frames/vtest --max-frames 20 --rounds 5 --backend $be --input mask=/tmp/sige_mask.npy "$@" > $OUT/r/sige_$tag.txt 2>&1
  echo "== sige $tag rc=$?: $(grep -E 'median|replayed|agree|warn|speedup|rror' $OUT/r/sige_$tag.txt | tr -s ' ' | tr '\n' ';')"
}
