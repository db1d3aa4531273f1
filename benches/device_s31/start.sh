# Sourced first by the session-31 device scripts: session 30's start (bench_lo, b24, best, pairs,
# torch_b1, torch_b24, gpu_test) with this session's binaries (dist-s31) in /tmp/d31.
DIST=${DIST:-dist-s31} D=${D:-/tmp/d31}
source "$(dirname "${BASH_SOURCE[0]}")/../device_s30/start.sh"
# Split members that add up their splits in a thread-block cluster (the binaries' default on
# sm_90) against the split finish in a second launch.
NOCL="DYNASPA_SC_CLUSTER=0"
# SL_EARLY's count added one local atomic per work-item, as in session 30 (the default: once per warp).
NOWARP="DYNASPA_SL_WARP=0"
