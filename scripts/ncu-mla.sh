#!/usr/bin/env bash
# Hardware counters of the Hopper MLA kernel on flash_bench --mla rows:
# speed of light, warp states and the stall samples per SASS line
# (SourceCounters), so that the waits between its two warpgroups (named
# barriers), on the copies (mbarrier spins) and at the proxy fences
# (MEMBAR) can be told apart. Per row: the report, its summary, the
# per-line CSV (gzipped) and scripts/ncu-stalls-by-role.py's reading of it
# (the kernel has no producer, so every line counts as a consumer's).
#
#   scripts/ncu-mla.sh        (OUT: where the reports go; default ./ncu-mla-out)
#
# Environment: BUILD_DIR (default build/ncu-mla), ROWS (flash_bench row
# names after "mla/bf16/", space-separated; default the 64 x 8192 x 128
# row and the one-sequence 32k row), FLASH_BENCH (a built flash_bench to
# use instead of building one), CUDA_ARCHS (default 90a).
set -uo pipefail
OUT=${OUT:-$PWD/ncu-mla-out}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build/ncu-mla}
ROWS=${ROWS:-"B64/K8192/H128/paged64 B1/K32768/H128/paged64"}
if [[ -z "${FLASH_BENCH:-}" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90a}" \
    -DFLASH_HEAD_DIMS=128 -DFLASH_BUILD_TESTS=OFF >"$OUT/configure.log" 2>&1 || { tail -20 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target flash_bench >"$OUT/build.log" 2>&1 ||
    { grep -E "error" -A3 "$OUT/build.log" | head -40; exit 1; }
fi
BENCH=${FLASH_BENCH:-$BUILD_DIR/bench/flash_bench}
for row in $ROWS; do
  name=$(echo "$row" | tr '/' '_')
  ncu --clock-control none -k regex:mla_kernel --launch-skip 2 --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section SchedulerStats --section Occupancy --section InstructionStats \
    --section MemoryWorkloadAnalysis --section SourceCounters --import-source no \
    --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
    --export "$OUT/ncu_$name" --force-overwrite \
    "$BENCH" --mla --no-standard --flash_iters=2 --gemm_iters=1 --warmup_ms=0 \
    --benchmark_filter="mla/bf16/$row/iterations" >"$OUT/ncu_$name.txt" 2>&1
  echo "== $row"
  grep -E "Duration|Memory Throughput|DRAM Throughput|L2 Hit Rate|Compute \(SM\) Throughput|Issue Slots Busy|Executed Ipc Active|No Eligible|Eligible Warps|Warp Cycles Per Issued|hmma|stalled|spends" \
    "$OUT/ncu_$name.txt" | cut -c1-300 | head -30
  ncu --import "$OUT/ncu_$name.ncu-rep" --page source --csv --print-source sass 2>/dev/null | gzip >"$OUT/source_$name.csv.gz"
  python3 scripts/ncu-stalls-by-role.py "$OUT/source_$name.csv.gz" 15 >"$OUT/stalls_$name.txt" 2>&1 &&
    head -40 "$OUT/stalls_$name.txt"
done
