#!/usr/bin/env bash
# Investigation (docs/perf/measurement.md): does the host's launch cost
# leak into flash_bench's event timing? Builds gap_probe.cu (beside this script)
# against an existing build's libflash.a and libflash_reference.a (BUILD_DIR,
# default build/ab as scripts/ab-bench.sh leaves it) and times head_dim 128
# cells both ways (see the probe's header). Run from the repository root:
#
#   BUILD_DIR=build/ab tools/investigations/gap-probe.sh
set -uo pipefail
OUT=${OUT:-$PWD/gap-probe-out}
mkdir -p "$OUT"
B=${BUILD_DIR:-build/ab}
nvcc -std=c++17 -O2 -arch=sm_90a -Iinclude -I"$B/include" -Itests/support -Ibench tools/investigations/gap_probe.cu bench/l2_flush.cu \
  "$B/tests/support/libflash_reference.a" "$B/libflash.a" -o "$B/gap_probe" || exit 1
for dtype in bf16 fp16; do
  "$B/gap_probe" 128 2048 0 $dtype
  "$B/gap_probe" 128 2048 1 $dtype
  "$B/gap_probe" 128 16384 0 $dtype
done 2>&1 | tee "$OUT/gap_probe.log"
