# Sourced first by the session-15 device scripts: session 13's start with pack.sh's binaries
# (dist-s15) unpacked into /tmp/d15 (BUILD_DIR: where session 13's correctness step finds the
# test binaries' repository), call AJ's binaries in $OLD, and the steps the calls share.
DIST=dist-s15 D=/tmp/d15 BUILD_DIR=/work/main FULL=1
source "$(dirname "${BASH_SOURCE[0]}")/../device_s13/start.sh"
# Call AJ's binaries (dist-s13b, c6e7963), the baseline of every session-15 call, in $OLD.
( DIST=dist-s13b D=/tmp/d13; source benches/device_s7/common.sh ) ; OLD=/tmp/d13
# The binaries of variant NAME: "old" is call AJ's, anything else this tree's.
bin() { [ $1 = old ] && echo $OLD || echo $D; }

source "$(dirname "${BASH_SOURCE[0]}")/helpers.sh"
