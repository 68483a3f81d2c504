#!/usr/bin/env bash
# A/B of two tandem binaries on the GPU machine, alternating so clock and power drift fall
# on both: ab.sh DIR_A DIR_B REPS [tandem args...]; prints the result rows of each run.
#   bash tests/gpu/ab.sh build-old build-new 2 bench --sections batch --batches 64,256
set -u
A=$1 B=$2 REPS=$3
shift 3
for r in $(seq "$REPS"); do
  for d in "$A" "$B"; do
    echo "== $d (round $r)"
    timeout 300 "$d/tandem" "$@" 2>&1 | grep -E "^(decode|prefill|mixed|random|shared)|out tok/s|tok/s" | grep -v "^\[" | head -20
  done
done
