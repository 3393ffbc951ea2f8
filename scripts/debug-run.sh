#!/usr/bin/env bash
# One-off investigation run (kept for the record of what was run): the read
# rate of 4 GiB by three kernels (bench/probes/read_probe.cu: the bench's
# 16-byte grid-stride reader, bulk copies into shared memory, and the decode
# kernel's own access pattern without its arithmetic), then the decode row
# B = 32 x 32k on the same machine.
set -uo pipefail
OUT=${OUT:-$PWD/debug-out}
mkdir -p "$OUT"
B=${BUILD_DIR:-build/gpu-check}
nvcc -O3 -std=c++17 -arch=sm_90a -o "$OUT/read_probe" bench/probes/read_probe.cu >"$OUT/probe-build.log" 2>&1 ||
  { echo "probe build FAILED"; cat "$OUT/probe-build.log"; }
"$OUT/read_probe" && rm -f "$OUT/read_probe"
HEAD_DIMS="128" scripts/gpu-check.sh build >/dev/null 2>&1
"$B/bench/flash_bench" --decode --benchmark_filter='B32/L32768/dense' 2>&1 | grep -E "^read ceiling|^\| 32768"
