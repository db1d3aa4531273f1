# Sourced first by the session-22 device scripts: session 21's start (bench, torch_b1, vs_rep,
# gpu_test, floor) with this session's binaries (dist-s22) in /tmp/d22; with FULL=1 the three
# full-size models exported in the background into /tmp/full (done: /tmp/full/all_done) and
# SIGE's edit mask (density 0.3, discs) written to /tmp/sige_mask.npy.
DIST=${DIST:-dist-s22} D=${D:-/tmp/d22}
FULL_ALL=${FULL:-}; unset FULL
source "$(dirname "${BASH_SOURCE[0]}")/../device_s21/start.sh"
if [ -n "$FULL_ALL" ]; then
  mkdir -p /tmp/full
  ( for f in dynconv avit sige; do timeout 200 python3 models/$f.py --sizes full --no-dataset --out /tmp/full > /tmp/full/export_$f.log 2>&1; done
    python3 benches/device_s22/sige_mask.py /tmp/sige_mask.npy
    touch /tmp/full/all_done ) &
fi
# One full-size model end to end on CUDA (`dynaspa bench`, 20 vtest frames, 5 rounds) with
# NAME=VALUE..., the median, replay and agreement lines echoed: full_model TAG MODEL [NAME=VALUE...]
full_model() {
  local tag=$1 m=$2 extra=(); shift 2
  [ $m = sige_full ] && extra=(--input mask=/tmp/sige_mask.npy)
  env "$@" timeout 120 $D/dynaspa bench /tmp/full/$m.onnx --frames models/frames/vtest --max-frames 20 --rounds 5 --backend cuda "${extra[@]}" > $OUT/r/full_${m}_$tag.txt 2>&1
  echo "== $m $tag rc=$?: $(grep -E 'median|replayed|agree|warn|speedup|rror' $OUT/r/full_${m}_$tag.txt | tr -s ' ' | tr '\n' ';')"
}
