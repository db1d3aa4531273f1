# Sourced first by the session-21 device scripts: session 20's start (bench, torch_b1,
# torch_b24, vs_rep, keep_caches) with this session's binaries (dist-s21) in /tmp/d21.
DIST=${DIST:-dist-s21} D=${D:-/tmp/d21}
source "$(dirname "${BASH_SOURCE[0]}")/../device_s20/start.sh"
# The OpenCL launch modes of session 21: "new" (arguments memoised, no event where none is
# waited on: the default) and "old" (every argument set and an event asked at every launch).
OLD_CL="DYNASPA_CL_SET_ALL_ARGS=1 DYNASPA_CL_LAUNCH_EVENTS=1"
# launch_floor on BACKEND (cuda, or opencl on NVIDIA) with NAME=VALUE...: floor TAG BACKEND [NAME=VALUE...]
floor() {
  local tag=$1 be=$2; shift 2
  env "$@" timeout 60 $D/launch_floor --backend $be $([ $be = opencl ] && echo --device NVIDIA) --samples 31 --runs 200 > $OUT/r/floor_$tag.txt 2>&1
  echo "floor $tag rc=$? $(grep -v device $OUT/r/floor_$tag.txt | tr -s ' ' | tr '\n' ';')"
}
