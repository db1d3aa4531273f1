#!/bin/bash
# Session 17, second build: session 13's pack into dist-s17b/ (ignored by git) of this tree with
# call_m_experiment.patch applied (`git apply` first, then revert), for call M against call K's
# binaries (dist-s17).
DIST=dist-s17b exec bash "$(dirname "$0")/../device_s13/pack.sh"
