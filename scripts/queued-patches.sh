#!/usr/bin/env bash
# The patches in docs/history/patches that wait for a GPU, in the order in
# which they apply together, and the device calls that test and measure
# them (docs/history/NOTES.md, the latest session's plan). Run on the
# device machine from the repository root, logs under $OUT:
#
#   scripts/queued-patches.sh test   # all applied; the whole suite (gpu-check.sh build test)
#   scripts/queued-patches.sh ab1    # A/B: flash_bench --mla (MLA decode, ragged batches longest first)
#   scripts/queued-patches.sh list   # the patch files, one a line
#
# `test` changes the working tree (git apply); the A/B builds copies
# (scripts/tile-sweep.sh) and leaves it alone.
set -uo pipefail
PATCHES=(
  2026-12-05-mla-longest-first  # issue 26: MLA decode, ragged batches longest first
)
dir=docs/history/patches
files=()
for p in "${PATCHES[@]}"; do files+=("$dir/$p.patch"); done
spec="all:"
for f in "${files[@]}"; do spec+="@$f;;"; done
spec=${spec%;;}

# One A/B of base against all the patches: head dims to build, then
# BENCH_ARGS and TABLE as scripts/tile-sweep.sh takes them.
ab() {
  HEAD_DIMS="$1" ROUNDS=${ROUNDS:-2} BENCH_TIMEOUT=${BENCH_TIMEOUT:-150} BENCH_ARGS="$2" TABLE="$3" \
    timeout "${AB_CALL_TIMEOUT:-590}" scripts/tile-sweep.sh 'base:' "$spec"
}

case "${1:-}" in
  list) printf '%s\n' "${files[@]}" ;;
  test)
    for f in "${files[@]}"; do git apply "$f" || { echo "$f does not apply"; exit 1; }; done
    timeout "${TEST_CALL_TIMEOUT:-590}" scripts/gpu-check.sh build test
    ;;
  ab1)
    ab "128" "--mla" '| batch | keys | heads'
    ;;
  *) sed -n '2,13p' "$0"; exit 2 ;;
esac
