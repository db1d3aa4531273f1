# Sourced first by the session-21 device scripts: session 20's start (bench, torch_b1,
# torch_b24, vs_rep, keep_caches) with this session's binaries (dist-s21) in /tmp/d21.
DIST=${DIST:-dist-s21} D=${D:-/tmp/d21}
source "$(dirname "${BASH_SOURCE[0]}")/../device_s20/start.sh"
# The OpenCL launch modes of session 21: "new" (arguments memoised, no event where none is
# waited on: the default) and "old" (every argument set and an event asked at every launch).
OLD_CL="DYNASPA_CL_SET_ALL_ARGS=1 DYNASPA_CL_LAUNCH_EVENTS=1"
# A GPU test binary of pack.sh with CUDA required, into $OUT/r/test_TAG.txt, its result line
# and any panic echoed: gpu_test NAME TAG [NAME=VALUE...]
gpu_test() {
  local t=$1 tag=$2; shift 2
  env "$@" DYNASPA_REQUIRE_BACKENDS=cuda timeout 150 $D/t_$t --test-threads 4 > $OUT/r/test_$tag.txt 2>&1
  echo "test $tag rc=$? $(grep '^test result' $OUT/r/test_$tag.txt | tail -1)"
  grep -E "panicked" -A 2 $OUT/r/test_$tag.txt | head -6 | cut -c1-300
}
# launch_floor on BACKEND (cuda, or opencl on NVIDIA) with NAME=VALUE...: floor TAG BACKEND [NAME=VALUE...]
floor() {
  local tag=$1 be=$2; shift 2
  env "$@" timeout 60 $D/launch_floor --backend $be $([ $be = opencl ] && echo --device NVIDIA) --samples 31 --runs 200 > $OUT/r/floor_$tag.txt 2>&1
  echo "floor $tag rc=$? $(grep -v device $OUT/r/floor_$tag.txt | tr -s ' ' | tr '\n' ';')"
}
