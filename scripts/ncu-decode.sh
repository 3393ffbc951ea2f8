#!/usr/bin/env bash
# Hardware counters of the decode kernel on --fp8 rows, bf16 and e4m3
# K/V side by side, and the opcode mix of the decode kernels' SASS.
#
#   scripts/ncu-decode.sh            (OUT: where the reports go; default ./ncu-decode-out)
#
# Environment: BUILD_DIR (default build/ncu-decode, head dim HD only),
# HD (default 128), ROWS (space-separated, default B32/L32768/dense; ROW is
# taken for one), KVS (default "bf16 bf16-e4m3kv"), CUDA_ARCHS (default 90a).
# Each (kv, row) pair gets a report ncu_<kv>_<row with / as _>.txt.
set -uo pipefail
OUT=${OUT:-$PWD/ncu-decode-out}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build/ncu-decode}
HD=${HD:-128}
ROWS=${ROWS:-${ROW:-B32/L32768/dense}}
KVS=${KVS:-bf16 bf16-e4m3kv}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90a}" \
  -DFLASH_HEAD_DIMS="$HD" -DFLASH_BUILD_TESTS=OFF >"$OUT/configure.log" 2>&1 || { tail -20 "$OUT/configure.log"; exit 1; }
cmake --build "$BUILD_DIR" -j "$(nproc)" --target flash_bench >"$OUT/build.log" 2>&1 || { grep -E "error" -A3 "$OUT/build.log" | head -40; exit 1; }
for kv in $KVS; do
  for row in $ROWS; do
    rep="$OUT/ncu_${kv}_${row//\//_}.txt"
    ncu --clock-control none -k regex:decode_kernel --launch-skip 2 --launch-count 1 --section SpeedOfLight \
      --section WarpStateStats --section ComputeWorkloadAnalysis --section SchedulerStats --section Occupancy \
      --section InstructionStats --section MemoryWorkloadAnalysis \
      --metrics sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active \
      "$BUILD_DIR/bench/flash_bench" --fp8 --decode_head_dims="$HD" --no-standard --flash_iters=2 --gemm_iters=1 \
      --benchmark_filter="decode/$kv/hd$HD/q32kv8/$row/" >"$rep" 2>&1
    echo "== $kv $row"
    grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Issue Slots Busy|Executed Ipc Active|No Eligible|Active Warps Per Scheduler|Eligible Warps|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|pipe_|hmma|stalled|spends" "$rep" | cut -c1-300 | head -40
  done
done
# Opcode mix per decode kernel (the unmasked, no-modifier variant).
cuobjdump --dump-sass "$BUILD_DIR/libflash.a" >"$OUT/sass.txt" 2>&1
awk '/Function :/ {on = ($3 ~ /decode_kernel/ && $3 ~ /Lb0ELb0EEEv/); name=$3} on && /\/\*[0-9a-f]+\*\/ / {
       op=$2; if (op ~ /^@/) op=$3; sub(/\..*/, "", op); sub(/;$/, "", op); n[name" "op]++ }
     END { for (k in n) print n[k], k }' "$OUT/sass.txt" | sort -k2,2 -k1,1nr | awk '{c[$2]++; if (c[$2] <= 25) print}' >"$OUT/opcodes.txt"
grep -E "e4m3|Lb1EEE" "$OUT/opcodes.txt" | head -25
rm -f "$OUT/sass.txt"
