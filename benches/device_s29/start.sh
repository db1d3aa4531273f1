# Sourced first by the session-29 device scripts: session 28's start (bench, bench_lo, best,
# pairs, torch_b1, torch_b24, gpu_test) with this session's binaries (dist-s29) in /tmp/d29.
DIST=${DIST:-dist-s29} D=${D:-/tmp/d29}
source "$(dirname "${BASH_SOURCE[0]}")/../device_s28/start.sh"
# Split GEMMs of 2-16 splits that add their partial sums across a thread-block cluster (CL),
# against the tree's split finish in a second launch (NOCL).
CL="DYNASPA_CLUSTER_FINISH=1"
NOCL="DYNASPA_CLUSTER_FINISH=0"
# Unsplit GEMMs storing through the unrolled sconv_store_tile.
ST="DYNASPA_SC_STORE_TILE=1"
