# Sourced first by the session-14 device scripts: session 13's start with pack.sh's binaries
# (dist-s14) unpacked into /tmp/d14.
DIST=dist-s14 D=/tmp/d14
source "$(dirname "${BASH_SOURCE[0]}")/../device_s13/start.sh"
