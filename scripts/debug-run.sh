#!/usr/bin/env bash
# One-off investigation run (kept for the record of what was run): does the
# split count move the batch-32 x 32k decode row? Interleaved rounds of
# num_splits 1 (what flash picks), 2, 4 and 33 (8448 CTAs = 32 full waves of
# 2 CTAs x 132 SMs), each run printing its own read ceiling.
set -uo pipefail
OUT=${OUT:-$PWD/debug-out}
mkdir -p "$OUT"
B=${BUILD_DIR:-build/gpu-check}
HEAD_DIMS="128" scripts/gpu-check.sh build >/dev/null 2>&1
for round in 1 2; do
  for s in 1 2 4 33; do
    "$B/bench/flash_bench" --decode --num_splits=$s --benchmark_filter='B(32|8)/L32768/dense' >"$OUT/splits_${s}_$round.log" 2>&1
    echo "round $round splits $s: $(grep -E '^read ceiling' "$OUT/splits_${s}_$round.log" | grep -oE '[0-9]+ GB/s')"
    grep -E '^\| 32768' "$OUT/splits_${s}_$round.log"
  done
done
