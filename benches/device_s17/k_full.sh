#!/bin/bash
# Session 17 call K, third part (same warm machine as k.sh 1 and 2, whose /tmp/full holds the
# exported model): the full-size DynConv with the new binaries, the same with
# DYNASPA_HOST_COUNTS=0, and session 16's, alternated three times.
source "$(dirname "$0")/start.sh"
for rep in 1 2 3; do
  full_run "[$rep] new" $D; full_run "[$rep] copy" $D DYNASPA_HOST_COUNTS=0; full_run "[$rep] old" $OLD
done
