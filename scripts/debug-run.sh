#!/usr/bin/env bash
# One-off investigation run (kept for the record of what was run): where the
# sm90 kernel's time goes at N = 2048 — per-pipe utilisation (tensor, MUFU
# "xu", FMA, ALU), issue activity and warp stalls of one launch each of
# hd64 causal and hd128 non-causal (bf16), by ncu with the clocks left alone.
set -uo pipefail
OUT=${OUT:-$PWD/debug-out}
mkdir -p "$OUT"
B=${BUILD_DIR:-build/gpu-check}
HEAD_DIMS="64;128" scripts/gpu-check.sh build >"$OUT/gpu-check.txt" 2>&1
tail -5 "$OUT/gpu-check.txt"
metrics=sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
metrics+=,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active
metrics+=,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active
metrics+=,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active
metrics+=,sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active
metrics+=,smsp__issue_active.avg.pct_of_peak_sustained_active
metrics+=,gpu__time_duration.sum
for row in hd64/causal hd128/noncausal; do
  hd=${row%%/*}; hd=${hd#hd}
  name=ncu_${row//\//_}
  ncu --clock-control none -k regex:fwd_kernel --launch-skip 3 --launch-count 1 --metrics "$metrics" \
    --section WarpStateStats \
    "$B/bench/flash_bench" --dtypes=bf16 --head_dims="$hd" --seqlens=2048 --no-standard --warmup_ms=0 \
    --flash_iters=5 --gemm_iters=1 --benchmark_filter="flash/bf16/$row" >"$OUT/$name.txt" 2>&1
  echo "== $row"
  grep -E "pipe|issue_active|duration|Stall|Warp Cycles Per|==ERR|==WARN" "$OUT/$name.txt" | head -24
done
