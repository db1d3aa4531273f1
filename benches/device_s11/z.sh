#!/bin/bash
# Session 11 call Z: bitmask.cl of call X without its divisions per tile, the bad-value minimum
# moved to the coarsest granularity's group, and an empty launch timed in front of each member
# (the floor of any separate mask launch), against call V's kernel (see mask_ab.sh).
source "$(dirname "$0")/mask_ab.sh"
