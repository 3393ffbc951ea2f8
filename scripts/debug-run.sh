#!/usr/bin/env bash
# One-off investigation run (kept for the record of what was run): decode
# time against the split count for batch 1 and 8 at 4k and 32k keys (dense
# cache), to check the split heuristic (run 31: at batch 8 x 32k, 2 splits
# beat the heuristic's 4).
set -uo pipefail
OUT=${OUT:-$PWD/debug-out}
mkdir -p "$OUT"
B=${BUILD_DIR:-build/gpu-check}
HEAD_DIMS="128" scripts/gpu-check.sh build >/dev/null 2>&1
for s in 0 1 2 4 8 16 32 64; do
  "$B/bench/flash_bench" --decode --num_splits=$s --warmup_ms=100 --benchmark_filter='B(1|8)/L(4096|32768)/dense' \
    >"$OUT/splits_$s.log" 2>&1
  echo "splits $s:"
  grep -E '^\| (4096|32768) \| (1|8) \|' "$OUT/splits_$s.log" | cut -d'|' -f2,3,5,7,8
done
