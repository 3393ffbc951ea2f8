#!/usr/bin/env bash
# Hardware counters of the Hopper kernel on --serving chunked-prefill rows,
# caches and cache dtypes side by side, with the warps' stall reasons per
# SASS line (SourceCounters), so the producer's and the consumers' waits can
# be read from where their instructions stall
# (scripts/ncu-stalls-by-role.py). And the producer's opcode mix in the
# e4m3-cache kernels' SASS (the code after its setmaxnreg).
#
#   scripts/ncu-serving-prefill.sh   (OUT: where the reports go; default ./ncu-serving-prefill-out)
#
# Environment: BUILD_DIR (default build/ncu-serving-prefill, head dim HD
# only; with FLASH_BENCH set, that flash_bench runs and nothing is built),
# HD (default 128), CACHES (default paged16; any of dense, seqused, paged1,
# paged16, paged64, paged256), KVS (cache dtypes, default "bf16
# bf16-e4m3kv"), CUDA_ARCHS (default 90a). Each row's report is
# ncu_hd<HD>_<kv>_<cache>.ncu-rep, its summary ncu_hd<HD>_<kv>_<cache>.txt
# and its per-SASS-line stall samples source_hd<HD>_<kv>_<cache>.csv.gz, so
# runs of several head dims can share OUT. A run's text files, logs and
# per-line samples end in $OUT/ncu-serving-prefill-hd<HD>.tgz, its reports
# in $OUT/reports/ncu (KEEP_REPS=1: in $OUT).
set -uo pipefail
OUT=${OUT:-$PWD/ncu-serving-prefill-out}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build/ncu-serving-prefill}
HD=${HD:-128}
CACHES=${CACHES:-${CACHE:-paged16}}
KVS=${KVS:-bf16 bf16-e4m3kv}
if [[ -z "${FLASH_BENCH:-}" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90a}" \
    -DFLASH_HEAD_DIMS="$HD" -DFLASH_BUILD_TESTS=OFF >"$OUT/configure.log" 2>&1 || { tail -20 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target flash_bench >"$OUT/build.log" 2>&1 || { grep -E "error" -A3 "$OUT/build.log" | head -40; exit 1; }
fi
BENCH=${FLASH_BENCH:-$BUILD_DIR/bench/flash_bench}
LIB=$(dirname "$(dirname "$BENCH")")/libflash.a
for kv in $KVS; do
  for cache in $CACHES; do
    name=hd${HD}_${kv}_$cache
    # The dense row has no e4m3 form.
    [[ $kv == *e4m3* && $cache == dense ]] && continue
    ncu --clock-control none -k regex:fwd_kernel --launch-skip 1 --launch-count 1 --section SpeedOfLight \
      --section WarpStateStats --section SchedulerStats --section Occupancy --section InstructionStats \
      --section MemoryWorkloadAnalysis --section SourceCounters --import-source no \
      --export "$OUT/ncu_$name" --force-overwrite \
      "$BENCH" --serving --serving_head_dims="$HD" --no-standard --flash_iters=2 --gemm_iters=1 \
      --warmup_ms=0 --benchmark_filter="serving/prefill/$kv/hd$HD/.*/$cache( e4m3)?/" >"$OUT/ncu_$name.txt" 2>&1
    echo "== $name"
    # With --export, ncu prints no sections: they come from the report.
    ncu --import "$OUT/ncu_$name.ncu-rep" --page details >"$OUT/details_$name.txt" 2>&1
    grep -E "Duration|Memory Throughput|DRAM Throughput|L2 Hit Rate|Compute \(SM\) Throughput|Issue Slots Busy|Executed Ipc Active|No Eligible|Eligible Warps|Warp Cycles Per Issued|stalled|spends" \
      "$OUT/details_$name.txt" | cut -c1-300 | head -30
    ncu --import "$OUT/ncu_$name.ncu-rep" --page source --csv --print-source sass 2>/dev/null | gzip >"$OUT/source_$name.csv.gz"
  done
done
# The e4m3 kernels' producer code (after setmaxnreg.dec), opcodes by count.
cuobjdump --dump-sass "$LIB" >"$OUT/sass.txt" 2>&1
awk '/Function :/ { on = ($3 ~ /fwd_kernel/ && $3 ~ /Lb1ELb1EEEv/); prod = 0; name = $3 }
     on && /USETMAXREG.DEALLOC/ { prod = 1 }
     on && prod && /\/\*[0-9a-f]+\*\/ / { op = $2; if (op ~ /^@/) op = $3; sub(/\..*/, "", op); sub(/;$/, "", op); n[name " " op]++ }
     END { for (k in n) print n[k], k }' "$OUT/sass.txt" | sort -k2,2 -k1,1nr | awk '{c[$2]++; if (c[$2] <= 15) print}' \
  >"$OUT/producer-opcodes.txt"
head -15 "$OUT/producer-opcodes.txt"
rm -f "$OUT/sass.txt"
# The device tool returns at most 8 files from $OUT: this run's text and
# per-line samples travel as one archive, the reports (about 5 MB each,
# readable only where ncu is) in $OUT/reports/ncu (KEEP_REPS=1: in $OUT).
(
  shopt -s nullglob
  cd "$OUT" || exit 1
  files=()
  for f in ncu_hd"${HD}"_*.txt details_hd"${HD}"_*.txt source_hd"${HD}"_*.csv.gz producer-opcodes.txt configure.log \
    build.log; do
    [[ -f $f ]] && files+=("$f")
  done
  tar czf "ncu-serving-prefill-hd$HD.tgz" -- "${files[@]}" && rm -f -- "${files[@]}"
)
if [[ "${KEEP_REPS:-0}" != 1 ]]; then
  mkdir -p "$OUT/reports/ncu" && mv "$OUT"/ncu_hd"${HD}"_*.ncu-rep "$OUT/reports/ncu/"
fi
