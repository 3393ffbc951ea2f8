#!/usr/bin/env bash
# Investigation (docs/perf/measurement.md): what the sm90 kernel's last,
# partly filled round of tiles costs. Builds the library, then
# tail_probe.cu (beside this script) against it, and times batches whose
# tile counts fill the last round to different degrees (see the probe's
# header). Run from the repository root:
#
#   tools/investigations/tail-probe.sh
set -uo pipefail
OUT=${OUT:-$PWD/tail-probe-out}
mkdir -p "$OUT"
B=${BUILD_DIR:-build/gpu-check}
OUT="$OUT/build" BUILD_DIR="$B" scripts/gpu-check.sh build >/dev/null 2>&1 || { echo "build failed"; exit 1; }
nvcc -std=c++17 -O2 -arch=sm_90a -Iinclude -I"$B/include" -Itests/support tools/investigations/tail_probe.cu \
  "$B/tests/support/libflash_reference.a" "$B/libflash.a" -o "$B/tail_probe" || exit 1
for round in 1 2; do
  "$B/tail_probe" 128 2048 0 8 33 16 17
  "$B/tail_probe" 128 2048 1 8 33
  "$B/tail_probe" 256 2048 0 8 33
  "$B/tail_probe" 64 2048 0 6 8
done 2>&1 | tee "$OUT/tail_probe.log"
