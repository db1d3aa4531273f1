# Sourced first by the session-16 device scripts: session 13's start with pack.sh's binaries
# (dist-s16) unpacked into /tmp/d16 and the full-size DynConv exported in the background, and
# session 15's helpers (PyTorch baselines, gpu_vs_torch, packing the results).
DIST=dist-s16
D=/tmp/d16
BUILD_DIR=/work/main
FULL=1
source "$(dirname "${BASH_SOURCE[0]}")/../device_s13/start.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../device_s15/helpers.sh"
