#!/usr/bin/env bash
# Clocks and power while flash_bench runs, one run per dtype: does the fp16
# sweep run at lower SM clocks than the bf16 one (power), or at the same?
#
#   tools/investigations/clock-probe.sh path/to/flash_bench [extra flash_bench flags]
#
# docs/perf/measurement.md reads its output (fp16 against bf16 clocks).
#
# Samples nvidia-smi every 100 ms during each run and prints, per dtype, the
# run's summary table and the median / min SM clock and median / max power
# over the samples taken while the GPU was busy (utilisation > 50%). Each
# flash row runs 400 timed launches, so with one long shape its samples
# outnumber the GEMM ceiling's.
set -uo pipefail
BENCH=${1:?usage: clock-probe.sh path/to/flash_bench [flags]}
shift
OUT=${OUT:-$PWD/clock-probe-out}
mkdir -p "$OUT"
for dtype in bf16 fp16; do
  nvidia-smi --query-gpu=utilization.gpu,clocks.sm,power.draw --format=csv,noheader,nounits -lms 100 \
    >"$OUT/smi-$dtype.csv" 2>/dev/null &
  sampler=$!
  "$BENCH" --no-standard --dtypes="$dtype" --flash_iters=400 "$@" >"$OUT/bench-$dtype.log" 2>&1
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
  echo "## $dtype"
  sed -n '/^| dtype/,/^$/p' "$OUT/bench-$dtype.log" | sed '1,2d' | cut -d'|' -f2-7
  grep -E '^gemm_(bf16|fp16)_8192' "$OUT/bench-$dtype.log" | sed 's/  */ /g'
  busy="$OUT/busy-$dtype.txt"
  awk -F', *' '$1 > 50 {print $2, $3}' "$OUT/smi-$dtype.csv" >"$busy"
  n=$(wc -l <"$busy")
  if [ "$n" -eq 0 ]; then
    echo "no busy samples"
  else
    mid=$(( (n + 1) / 2 ))
    clk_med=$(cut -d' ' -f1 "$busy" | sort -n | sed -n "${mid}p")
    clk_min=$(cut -d' ' -f1 "$busy" | sort -n | head -1)
    pw_med=$(cut -d' ' -f2 "$busy" | sort -g | sed -n "${mid}p")
    pw_max=$(cut -d' ' -f2 "$busy" | sort -g | tail -1)
    echo "busy samples $n: SM clock median $clk_med MHz, min $clk_min; power median $pw_med W, max $pw_max W"
  fi
done
