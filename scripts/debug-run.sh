#!/usr/bin/env bash
# One-off investigation run (kept for the record of what was run): the
# Features.SlidingWindow case that failed under ctest with one seed, against
# both references; the decode bench; ncu on the batch-1 decode kernel.
set -uo pipefail
OUT=${OUT:-$PWD/debug-out}
mkdir -p "$OUT"
B=${BUILD_DIR:-build/gpu-check}
scripts/gpu-check.sh build decode >"$OUT/gpu-check.txt" 2>&1
tail -40 "$OUT/gpu-check.txt"
for ref in cublas cpu; do
  FLASH_TEST_SEED=6338329556404522979 FLASH_TEST_FEATURE_REF=$ref "$B/tests/flash_gpu_tests" \
    --gtest_filter=Features.SlidingWindow >"$OUT/window_$ref.log" 2>&1
  echo "window seed 6338329556404522979 ref=$ref: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/window_$ref.log" | head -1)"
  grep -E "rel_l2|backend|window\(" "$OUT/window_$ref.log" | head -12
done
ncu --clock-control none -k regex:'decode_kernel|combine_kernel' --launch-skip 6 --launch-count 2 --section SpeedOfLight \
  --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats \
  "$B/bench/flash_bench" --decode --warmup_ms=0 --flash_iters=3 \
  --benchmark_filter='B1/L32768/dense' >"$OUT/ncu_decode_b1.txt" 2>&1
grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Grid Size|Stall|Warp Cycles Per Issued|decode_kernel|combine_kernel" "$OUT/ncu_decode_b1.txt" | head -40
