#!/bin/bash
# Session 17 call L: the issue-5 convs at batch 1 against PyTorch, alternated three times in one
# call (PyTorch, then this tree's binaries (dist-s17), then session 16's (dist-s16)), each of
# ours compared with the PyTorch run just before it, so the ratios carry the host's drift
# between runs rather than one PyTorch figure for the whole call.
source "$(dirname "$0")/start.sh"
DUMP=1 bench b1 new_0 $D
b1_rounds new $D old $OLD
pack_results
