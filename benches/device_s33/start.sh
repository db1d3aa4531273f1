# Sourced first by the session-33 device scripts: session 32's start (sweep, torch_sw, knobs,
# gpu_test, best.py, fused_pairs.py) with this session's binaries (dist-s33) in /tmp/d33.
DIST=${DIST:-dist-s33} D=${D:-/tmp/d33}
source "$(dirname "${BASH_SOURCE[0]}")/../device_s32/start.sh"
# The tree before this session's frame boundary: the GEMM waits first, the finish triggers by
# ending, mapped counts record their event when queued.
OLD="DYNASPA_SL_PREWAIT=0 DYNASPA_FIN_TRIGGER=0 DYNASPA_COUNTS_EVENT=write"
# One of the three at a time, the others as in OLD.
ONLY_PRE="DYNASPA_FIN_TRIGGER=0 DYNASPA_COUNTS_EVENT=write"
ONLY_TRIG="DYNASPA_SL_PREWAIT=0 DYNASPA_COUNTS_EVENT=write"
ONLY_EV="DYNASPA_SL_PREWAIT=0 DYNASPA_FIN_TRIGGER=0"
