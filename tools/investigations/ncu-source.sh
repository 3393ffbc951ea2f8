#!/usr/bin/env bash
# Investigation (docs/perf/sm90-pingpong-and-lazy-max.md): where one sm90 launch's warps
# stall, per SASS instruction. Builds flash_bench for one head dim, profiles
# one launch of one sweep row with ncu (warp states, scheduler, source
# counters; clocks uncontrolled, as the bench runs them) and writes the
# source page as CSV next to the text report.
#
#   HD=64 CAUSAL=causal N=2048 tools/investigations/ncu-source.sh
set -uo pipefail
OUT=${OUT:-$PWD/ncu-source-out}
mkdir -p "$OUT"
HD=${HD:-64}
CAUSAL=${CAUSAL:-causal}
N=${N:-2048}
B=${BUILD_DIR:-build/ncu$HD}
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DFLASH_HEAD_DIMS="$HD" \
  -DFLASH_BUILD_TESTS=OFF -DFLASH_BUILD_EXAMPLES=OFF >"$OUT/configure.log" 2>&1 &&
  cmake --build "$B" -j "$(nproc)" --target flash_bench >"$OUT/build.log" 2>&1 || { echo "build failed"; exit 1; }
rep="$OUT/hd${HD}_${CAUSAL}_$N"
ncu --clock-control none -k regex:fwd_kernel --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
  --section SourceCounters --import-source no -f -o "$rep" \
  "$B/bench/flash_bench" --dtypes=bf16 --head_dims="$HD" --seqlens="$N" --no-standard --flash_iters=2 \
  --gemm_iters=1 --warmup_ms=0 --benchmark_filter="flash/bf16/hd$HD/$CAUSAL/N$N" >"$OUT/ncu_run.log" 2>&1
ncu --import "$rep.ncu-rep" --print-details all >"$rep.txt" 2>&1
ncu --import "$rep.ncu-rep" --page source --csv --print-source sass >"$rep.source.csv" 2>&1
gzip -f "$rep.source.csv"
rm -f "$rep.ncu-rep"
grep -E "Duration|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Stall|Tensor|SM Busy" "$rep.txt" | head -40
