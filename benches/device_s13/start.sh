# Sourced first by the session-13 device scripts (and session 14's, with DIST and D set): the
# binaries of pack.sh unpacked into $D (/tmp/d13 unless set; device_s7/common.sh), results
# under $OUT/r, the log teed to $OUT/log.txt, the GPU named; with FULL=1 the full-size DynConv
# exported in the background into /tmp/full (done: /tmp/full/done).
DIST=${DIST:-dist-s13} D=${D:-/tmp/d13}
source "$(dirname "${BASH_SOURCE[0]}")/../device_s7/common.sh"
mkdir -p $OUT/r
exec > >(tee $OUT/log.txt) 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ -n "${FULL:-}" ]; then
  mkdir -p /tmp/full
  ( timeout 200 python3 models/dynconv.py --sizes full --no-dataset --out /tmp/full > /tmp/full/export.log 2>&1; touch /tmp/full/done ) &
fi

# The full-size DynConv end to end (`dynaspa bench`, 20 vtest frames, 5 rounds) with the
# binaries in DIR, its median line echoed after LABEL: full_run LABEL DIR [NAME=VALUE...].
full_run() {
  local label=$1 b=$2; shift 2
  echo "== $label full DynConv: $(env "$@" timeout 60 $b/dynaspa bench /tmp/full/dynconv_full_d30.onnx --frames models/frames/vtest --max-frames 20 --rounds 5 --backend cuda 2>&1 | grep -E 'median|speedup_vs_dense' | tr '\n' ' ')"
}
# full_run with the environment variable NAME set to each VALUE in turn, alternated twice:
# full_ab NAME VALUE...
full_ab() {
  local name=$1 rep v; shift
  while [ ! -f /tmp/full/done ]; do sleep 2; done; tail -1 /tmp/full/export.log
  for rep in 1 2; do
    for v in "$@"; do full_run "[$rep] $name=$v" $D $name=$v; done
  done
}
# full_run with each binary folder DIR in turn, alternated twice: full_bins DIR...
full_bins() {
  local rep b
  while [ ! -f /tmp/full/done ]; do sleep 2; done; tail -1 /tmp/full/export.log
  for rep in 1 2; do
    for b in "$@"; do full_run "[$rep] $b" $b; done
  done
}
