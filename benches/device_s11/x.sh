#!/bin/bash
# Session 11 call X: bitmask.cl with coalesced packing through local bytes and strided tile
# tests, against call V's kernel (see mask_ab.sh). Call X's binaries were built at the commit
# before the divisions went (its ncu read only the SpeedOfLight section; mask_ab.sh also reads
# the instruction counts).
source "$(dirname "$0")/mask_ab.sh"
