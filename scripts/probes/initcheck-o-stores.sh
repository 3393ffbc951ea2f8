#!/usr/bin/env bash
# Whether compute-sanitizer's initcheck counts the Hopper kernel's TMA
# stores of O as writes (scripts/sanitize.sh keeps its host-API check off
# for basic_attention and attention_c, whose dense O copies it reports).
# Builds initcheck-o-stores.cu against the library of a gpu-check build
# (BUILD_DIR, default build/gpu-check; `scripts/gpu-check.sh build` first),
# then runs it under initcheck with its host-API checks on, once a store
# path: the Hopper kernel's dense call (TMA stores), the decode kernel's
# and the sm80 kernel's (st.global; sm80 only where the build has sm_80
# code, gpu-check's default 90a has not) and the Hopper kernel's varlen
# call (guarded 16-byte stores). One line each: the kernel, initcheck's
# error count and the probe's exit code. If only the first reports
# errors, and O is finite in all, the reports are initcheck not tracking
# TMA stores. Run on the
# device machine from the repository root; logs under $OUT.
# Result (H100 80GB HBM3, the device machine's compute-sanitizer, 2026-12-07,
# after `gpu-check.sh build sanitize`): sm90 128,000 errors (every
# 32-byte sector of O), decode 0, sm80 0, sm90-varlen 0; exit 0 and O
# finite in all four.
set -uo pipefail
OUT=${OUT:-.}
BUILD_DIR=${BUILD_DIR:-build/gpu-check}
SANITIZER=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
probe="$OUT/initcheck-o-stores"
"$NVCC" -std=c++17 -O2 -arch=sm_90a -cudart shared -I include -I "$BUILD_DIR/include" \
  scripts/probes/initcheck-o-stores.cu "$BUILD_DIR/libflash.a" -o "$probe" >"$OUT/probe-build.log" 2>&1 ||
  { echo "probe build failed:"; tail -20 "$OUT/probe-build.log"; exit 1; }
echo "| mode | kernel | initcheck errors | probe exit |"
for mode in sm90 decode sm80 sm90-varlen; do
  "$SANITIZER" --tool initcheck "$probe" "$mode" >"$OUT/initcheck-$mode.log" 2>&1
  rc=$?
  kernel=$(grep -m1 "^$mode: " "$OUT/initcheck-$mode.log" | sed -E 's/.*\((.*)\)$/\1/')
  errors=$(grep -m1 -oE 'ERROR SUMMARY: [0-9]+' "$OUT/initcheck-$mode.log" | grep -oE '[0-9]+$')
  finite=$(grep -m1 "not finite" "$OUT/initcheck-$mode.log" | sed -E "s/^$mode: //")
  echo "| $mode | ${kernel:-?} | ${errors:-no summary} | $rc (${finite:-no O check}) |"
done
