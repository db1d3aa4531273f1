# Sourced by the session-14 device scripts: session 13's correctness step, for test binaries
# built in /work/main.
BUILD_DIR=/work/main
source "$(dirname "${BASH_SOURCE[0]}")/../device_s13/correctness.sh"
