#!/usr/bin/env bash
# The patches in docs/history/patches that wait for a GPU, in the order in
# which they apply together, and the device calls that test and measure
# them (docs/history/NOTES.md, the latest session's plan). Run on the
# device machine from the repository root, logs under $OUT:
#
#   scripts/queued-patches.sh test        # all applied; the whole suite (gpu-check.sh build test)
#   scripts/queued-patches.sh sanitize    # all applied; compute-sanitizer over the Sanitizer suites and the new paths' tests
#   scripts/queued-patches.sh ab1         # the standard sweep at hd64 and hd128: base, all, the pass alone
#   scripts/queued-patches.sh ab2         # A/B of flash_bench --features (ALiBi and sinks against plain)
#   scripts/queued-patches.sh ab3         # A/B of hd96's head-dim rows (N 2048 causal and not, 16k)
#   scripts/queued-patches.sh ab4         # A/B of the FP8 prefill rows and the serving prefill rows (bf16 and e4m3 caches)
#   scripts/queued-patches.sh ab5         # A/B of the serving prefill rows on the sm80 kernel (--backend=sm80)
#   scripts/queued-patches.sh list        # the patch files, one a line
#
# `test` and `sanitize` change the working tree (git apply); the A/Bs build copies
# (scripts/tile-sweep.sh) and leave it alone.
set -uo pipefail
PATCHES=(
  2026-12-05-pass-hidden-blocks    # issue 29: 192-row tiles pass over a warpgroup's hidden blocks
  2026-12-05-diagonal-live-groups  # issue 29: the first block's softmax skips the warp's hidden columns
  2026-12-05-uniform-q-address     # spills: the warpgroup's Q address in a uniform register
  2026-12-05-fp8-cache-copy-addresses  # issue 27: fp8-cache copies and Q descriptors not held across blocks
  2026-12-05-fresh-q-descriptors   # spills: Q descriptors rebuilt per block in the cache and hd256 kernels that spill
  2026-12-05-sm80-paged-copy-addresses  # spills: the sm80 kernel's paged copies without hoisted addresses
  2026-12-05-cache-producer-72-registers  # issue 25: gathering KV-cache producers at 72 registers, consumers 216
)
dir=docs/history/patches
files=()
for p in "${PATCHES[@]}"; do files+=("$dir/$p.patch"); done
spec="all:"
for f in "${files[@]}"; do spec+="@$f;;"; done
spec=${spec%;;}

apply_all() {
  for f in "${files[@]}"; do git apply "$f" || { echo "$f does not apply"; exit 1; }; done
}

# One A/B of base against all the patches: head dims to build, then
# BENCH_ARGS and TABLE as scripts/tile-sweep.sh takes them, then any
# further variants (tile-sweep.sh's "name:edits").
ab() {
  HEAD_DIMS="$1" ROUNDS=${ROUNDS:-2} BENCH_TIMEOUT=${BENCH_TIMEOUT:-150} BENCH_ARGS="$2" TABLE="$3" \
    timeout "${AB_CALL_TIMEOUT:-590}" scripts/tile-sweep.sh 'base:' "$spec" "${@:4}"
}

case "${1:-}" in
  list) printf '%s\n' "${files[@]}" ;;
  test)
    apply_all
    timeout "${TEST_CALL_TIMEOUT:-590}" scripts/gpu-check.sh build test
    ;;
  sanitize)
    apply_all
    SANITIZE_FILTER=${SANITIZE_FILTER:-'*Sanitizer*:GraphsThreads.*:*HiddenTopBlocks*:*Fp8Cache*q130*:*SinksAlibi*window*'} \
      timeout "${TEST_CALL_TIMEOUT:-590}" scripts/gpu-check.sh build sanitize
    ;;
  ab1)
    ab "64;128" "--head_dims=64,128 --seqlens=512,1024,2048,16384 --no-standard" '| dtype' \
      "pass:@$dir/2026-12-05-pass-hidden-blocks.patch"
    ;;
  ab2)
    ab "64;128" "--features --benchmark_filter=features/" '| shape'
    ;;
  ab3)
    ab "96;128" "--head_dim_rows --no-standard --benchmark_filter=head_dims/hd(96|128)" '| head_dim | N'
    ;;
  ab4)
    # prod72: the last patch's register split alone, on the base (where the
    # fp8 kernels at head dims 192 and 256 keep 56 / 224).
    ab "64;128;256" "--fp8_prefill --no-standard;;--serving --no-standard --benchmark_filter=serving/prefill/" \
      '| head_dim | causal | fp8;;| head_dim | cache' \
      "prod72:kernels/sm90/fwd_kernel.cuh:s/kWidest = kWideProducer && kFp8 && Traits::kHeadDim <= 128;/kWidest = kWideProducer \&\& (!kFp8 || Traits::kHeadDim <= 128);/"
    ;;
  ab5)
    ab "64;128;256" "--serving --no-standard --backend=sm80 --benchmark_filter=serving/prefill/bf16/" '| head_dim | cache'
    ;;
  *) sed -n '2,17p' "$0"; exit 2 ;;
esac
