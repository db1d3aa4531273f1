#!/bin/bash
# Session 17, fourth build: session 13's pack of this tree (the key-norm pass split over several
# work-groups per head) into dist-s17d/ (ignored by git), for call O.
DIST=dist-s17d exec bash "$(dirname "$0")/../device_s13/pack.sh"
