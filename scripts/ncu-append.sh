#!/usr/bin/env bash
# Kernel by kernel, what a decode call with append (and rotary) costs over
# the plain call: ncu on one features/append shape's three rows (plain,
# append, append_rotary), each launch's duration and the decode kernel's
# warp states.
#
#   scripts/ncu-append.sh            (OUT: where the reports go; default ./ncu-append-out)
#
# Environment: BENCH (a built flash_bench; default: build one at hd128 in
# BUILD_DIR, default build/ncu-append), SHAPE (default decode_B1_hd128_4k).
set -uo pipefail
OUT=${OUT:-$PWD/ncu-append-out}
mkdir -p "$OUT"
SHAPE=${SHAPE:-decode_B1_hd128_4k}
BENCH=${BENCH:-}
if [[ -z "$BENCH" ]]; then
  BUILD_DIR=${BUILD_DIR:-build/ncu-append}
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90a}" \
    -DFLASH_HEAD_DIMS=128 -DFLASH_BUILD_TESTS=OFF >"$OUT/configure.log" 2>&1 || { tail -20 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target flash_bench >"$OUT/build.log" 2>&1 || { grep -E "error" -A3 "$OUT/build.log" | head -40; exit 1; }
  BENCH=$BUILD_DIR/bench/flash_bench
fi
for mode in plain append append_rotary; do
  # The first launches are the row's warm-up; skip them, keep a few of each kernel.
  ncu --clock-control none -k 'regex:decode|combine|append' --launch-skip 12 --launch-count 6 \
    --section SpeedOfLight --section WarpStateStats --section LaunchStats \
    --metrics smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio \
    "$BENCH" --features --no-standard --warmup_ms=0 --flash_iters=10 --gemm_iters=1 \
    --benchmark_filter="features/append/$SHAPE/$mode/" >"$OUT/ncu_$mode.txt" 2>&1
  echo "== $mode"
  grep -E "^  [^ ].*\)x\(|Duration|Grid Size|Registers Per|Warp Cycles Per Issued|stalled" "$OUT/ncu_$mode.txt" \
    | sed -E 's/(void )?flash::[a-z0-9_:]*::([a-z_]+)<.*\)x\(/\2 (x(/' | cut -c1-160 | head -40
done
