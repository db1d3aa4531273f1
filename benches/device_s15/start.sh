# Sourced first by the session-15 device scripts: session 13's start with pack.sh's binaries
# (dist-s15) unpacked into /tmp/d15, and its correctness step for test binaries built in
# /work/main.
DIST=dist-s15 D=/tmp/d15 BUILD_DIR=/work/main FULL=1
source "$(dirname "${BASH_SOURCE[0]}")/../device_s13/start.sh"
