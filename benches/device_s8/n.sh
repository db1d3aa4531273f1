#!/bin/bash
# Session 8 call N: as call M (m.sh) but the live searches get 40 trials, so the unpruned
# search has room to improve before pruning is judged against its final; no tau sample
# (TX_ARGS: OPS SAMPLE SEEDS TRIALS HELD).
TX_ARGS=${TX_ARGS:-6 0 2 40 0} TX_TIMEOUT=${TX_TIMEOUT:-520} exec bash "$(dirname "$0")/m.sh"
