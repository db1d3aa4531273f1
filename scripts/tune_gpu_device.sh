#!/usr/bin/env bash
# Tunes the reduced model families on an NVIDIA GPU, with CUDA and with NVIDIA's OpenCL, and
# writes the profiles to $OUT/profiles/<backend>-<device>/<model>.json (with their measurement
# logs and the summary tables), ready to copy under profiles/.
#
# Prepare on the dev machine (the GPU machine has no network), then run from the repository
# root on the GPU machine with the binary carried in dist/:
#
#   cargo build --release && mkdir -p dist && cp target/release/dynaspa dist/
#   bash scripts/tune_gpu_device.sh cuda      # ~4 minutes
#   bash scripts/tune_gpu_device.sh opencl    # ~4 minutes (NVIDIA's OpenCL platform)
#   PRECISION=f16 bash scripts/tune_gpu_device.sh cuda   # half precision: <backend>-<device>-f16/
#
# (each is one command within a 10-minute limit; `all` runs both in turn; MODELS="..." tunes a
# subset.) A-ViT's PolyKernel ops on a GPU are its token projections. Budget per model: the
# search stops after SEARCH_S seconds (members found so far are kept; then their dispatch
# tables are measured); compiling a new schedule through NVRTC or the driver is most of it.
set -uo pipefail
cd "$(dirname "$0")/.."

BIN=${DYNASPA:-dist/dynaspa}
OUT=${OUT:-out/tune_gpu}
SEARCH_S=${SEARCH_S:-45}
TRIALS=${TRIALS:-16}
PRECISION=${PRECISION:-f32}
export DYNASPA_CACHE_DIR=${DYNASPA_CACHE_DIR:-/tmp/dynaspa-tune-cache}

[ -x "$BIN" ] || { echo "no dynaspa binary at $BIN (build it and copy it there, or set DYNASPA)" >&2; exit 2; }
case "${1:-all}" in
    cuda) backends=(cuda) ;;
    opencl) backends=(opencl) ;;
    all) backends=(cuda opencl) ;;
    *) echo "usage: $0 cuda|opencl|all" >&2; exit 2 ;;
esac

# The device's name as a directory: lower case, runs of other characters as one dash.
slug() { tr 'A-Z' 'a-z' | sed -e 's/[^a-z0-9]\{1,\}/-/g' -e 's/^-//' -e 's/-$//'; }

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
status=0
for be in "${backends[@]}"; do
    dev_args=()
    if [ "$be" = opencl ]; then
        # The NVIDIA platform, not PoCL or another ICD that may be installed beside it.
        dev_args=(--device NVIDIA)
    fi
    name=$("$BIN" devices --json 2>/dev/null | python3 -c '
import json, sys
be, want = sys.argv[1], sys.argv[2]
for d in json.load(sys.stdin):
    i = d.get("info")
    if d["backend"] == be and i and (not want or want.lower() in i["name"].lower()):
        print(i["name"]); break
' "$be" "$([ "$be" = opencl ] && echo nvidia)")
    if [ -z "$name" ]; then
        echo "== $be: no device (dynaspa devices says:)"; "$BIN" devices 2>&1 | grep "^$be"
        status=1
        continue
    fi
    dir="$OUT/profiles/$be-$(printf '%s' "$name" | slug)"
    # A profile holds at its own precision only: f16 ones live beside the f32 ones.
    [ "$PRECISION" = f32 ] || dir="$dir-$PRECISION"
    mkdir -p "$dir"
    for m in ${MODELS:-dynconv_small_d30 sige_small avit_small_d30}; do
        echo "== $be $name $m $PRECISION ($(date -u +%FT%TZ))"
        start=$SECONDS
        timeout 200 "$BIN" tune "models/$m.onnx" --masks models/masks --backend "$be" "${dev_args[@]}" \
            --precision "$PRECISION" --trials "$TRIALS" --time-budget "$SEARCH_S" -o "$dir/$m.json" > "$dir/$m.summary.txt" 2> "$dir/$m.stderr.txt"
        rc=$?
        tail -n 16 "$dir/$m.summary.txt"
        grep -v '^tune \[' "$dir/$m.stderr.txt" | tail -n 4
        echo "-- exit $rc after $((SECONDS - start)) s"
        # A model with no GPU PolyKernel op: not a failure of the device.
        if [ $rc -ne 0 ] && ! grep -q "nothing to tune" "$dir/$m.stderr.txt"; then status=1; fi
    done
done
echo "profiles under $OUT/profiles:"; find "$OUT/profiles" -name '*.json' | sort
exit $status
