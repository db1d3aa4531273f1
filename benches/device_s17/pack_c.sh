#!/bin/bash
# Session 17, third build: session 13's pack into dist-s17c/ (ignored by git) of this tree with
# call_n_experiment.patch applied (the split-K finish stepping over the frame's columns,
# FINISH_LOOP; `git apply` first, then revert), for call N.
DIST=dist-s17c exec bash "$(dirname "$0")/../device_s13/pack.sh"
