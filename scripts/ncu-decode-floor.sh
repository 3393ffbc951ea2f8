#!/usr/bin/env bash
# Where a batch-1 decode call's time goes: ncu on flash_bench --decode rows
# of one head dim (default: 128 keys, one launch without a split, and 4096
# keys, split, with its combine), each kernel's duration, warp states and
# stall samples per SASS line (SourceCounters). Caches are flushed before
# each launch (ncu's default), as the bench's L2 flush does, so the
# instruction fetch and the first loads are cold.
#
#   scripts/ncu-decode-floor.sh        (OUT: where the reports go; default ./ncu-decode-floor-out)
#
# Environment: HD (default 128), KV (bf16, or bf16-e4m3kv for the --fp8
# rows of an e4m3 cache; default bf16), ROWS (flash_bench row tails after
# "decode/<KV>/hd<HD>/q32kv8/", space-separated; default "B1/L128/dense
# B1/L4096/dense"), FLASH_BENCH (a built flash_bench; default: build one
# of head dim HD in BUILD_DIR, default build/ncu-decode-floor),
# CUDA_ARCHS (default 90a). Per row: the text report, the per-line CSV of
# each kernel (gzipped) and scripts/ncu-stalls-by-role.py's reading of it
# (the decode kernel has no producer: every line counts as a consumer's).
set -uo pipefail
OUT=${OUT:-$PWD/ncu-decode-floor-out}
mkdir -p "$OUT"
HD=${HD:-128}
KV=${KV:-bf16}
ROWS=${ROWS:-"B1/L128/dense B1/L4096/dense"}
BUILD_DIR=${BUILD_DIR:-build/ncu-decode-floor}
if [[ -z "${FLASH_BENCH:-}" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90a}" \
    -DFLASH_HEAD_DIMS="$HD" -DFLASH_BUILD_TESTS=OFF >"$OUT/configure.log" 2>&1 || { tail -20 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target flash_bench >"$OUT/build.log" 2>&1 ||
    { grep -E "error" -A3 "$OUT/build.log" | head -40; exit 1; }
fi
BENCH=${FLASH_BENCH:-$BUILD_DIR/bench/flash_bench}
# The rows' lengths and batches, so that flash_bench registers them.
seqlens=$(for r in $ROWS; do r=${r#*/L}; echo "${r%%/*}"; done | sort -un | paste -sd,)
batches=$(for r in $ROWS; do r=${r#B}; echo "${r%%/*}"; done | sort -un | paste -sd,)
mode=--decode
[[ "$KV" == *e4m3* ]] && mode=--fp8
ARGS=("$mode" --decode_head_dims="$HD" --decode_seqlens="$seqlens" --decode_batches="$batches" --no-standard
      --flash_iters=4 --gemm_iters=1 --warmup_ms=0)
rm -f "$OUT/configure.log" "$OUT/build.log"  # at most eight files come back from a device call
for row in $ROWS; do
  name=${KV}_hd${HD}_$(echo "$row" | tr '/' '_')
  # The row's first launches warm it up. Pass 1: the durations of a decode
  # launch and (split) its combine; pass 2: the decode kernel's stall samples.
  ncu --clock-control none -k 'regex:decode_kernel|combine_kernel' --launch-skip 4 --launch-count 2 \
    --section SpeedOfLight --section WarpStateStats --section LaunchStats --section InstructionStats \
    "$BENCH" "${ARGS[@]}" --benchmark_filter="decode/$KV/hd$HD/q32kv8/$row/" >"$OUT/ncu_$name.txt" 2>&1
  ncu --clock-control none -k 'regex:decode_kernel' --launch-skip 2 --launch-count 1 --section SourceCounters \
    --import-source no --export "$OUT/ncu_$name" --force-overwrite \
    "$BENCH" "${ARGS[@]}" --benchmark_filter="decode/$KV/hd$HD/q32kv8/$row/" >>"$OUT/ncu_$name.txt" 2>&1
  echo "== $row"
  grep -E "^  [^ ].*\)x\(|Duration|Grid Size|Registers Per|Warp Cycles Per Issued|Executed Instructions  " \
    "$OUT/ncu_$name.txt" | sed -E 's/(void )?flash::[a-z0-9_:]*::([a-z_]+)<.*\)x\(/\2 (x(/' | cut -c1-160 | head -20
  [[ -f "$OUT/ncu_$name.ncu-rep" ]] || { echo "no decode kernel profiled for $row (see ncu_$name.txt)"; continue; }
  ncu --import "$OUT/ncu_$name.ncu-rep" --page source --csv --print-source sass 2>/dev/null | gzip >"$OUT/source_$name.csv.gz"
  python3 scripts/ncu-stalls-by-role.py "$OUT/source_$name.csv.gz" 25 >"$OUT/stalls_$name.txt" 2>&1 &&
    head -32 "$OUT/stalls_$name.txt"
  rm -f "$OUT/ncu_$name.ncu-rep"
done
