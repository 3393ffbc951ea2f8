#!/usr/bin/env bash
# The patches in docs/history/patches that wait for a GPU, in the order in
# which they apply together, and the device calls that test and measure
# them (docs/history/NOTES.md, the latest session's plan). Run on the
# device machine from the repository root, logs under $OUT:
#
#   scripts/queued-patches.sh test   # all applied; the whole suite (gpu-check.sh build test)
#   scripts/queued-patches.sh ab1    # A/B: decode merge, hd96 tile, ALiBi on the tensor cores
#   scripts/queued-patches.sh ab2    # A/B: FP8 row sums, longest-first walk
#   scripts/queued-patches.sh ab3    # A/B: hd256 gather tile, fp8-cache Q K^T on e4m3, MLA seesaw and order
#   scripts/queued-patches.sh list   # the patch files, one a line
#
# `test` changes the working tree (git apply); the A/Bs build copies
# (scripts/tile-sweep.sh) and leave it alone.
set -uo pipefail
PATCHES=(
  decode-merge-in-kernel            # issue 25: batch-1 decode merges its own splits
  sm90-longest-first                # issue 29: hd64 causal 4k-16k walk
  fp8-prefill-row-sums              # issue 27: FP8 prefill row sums on the tensor cores
  hd256-gather-kernel-on-row-sums   # issue 25: hd256 gather tile 40/232 registers
  hd96-192x96                       # issue 26: hd96 on three consumer warpgroups
  alibi-on-tensor-cores-on-five     # issue 26: causal ALiBi's column term on the tensor cores
  fp8-cache-e4m3-qk-on-six          # issue 27: fp8-cache prefill, Q K^T on e4m3, K not widened
  mla-seesaw-on-seven               # issue 26: MLA decode, FlashMLA's seesaw schedule
  mla-longest-first-on-eight        # issue 26: MLA decode, ragged batches longest first
)
dir=docs/history/patches
files=()
for p in "${PATCHES[@]}"; do files+=("$dir/2026-12-04-$p.patch"); done
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
    ab "64;96;128" \
      "--decode --decode_head_dims=64,128 --l2_flush=read;;--head_dim_rows --benchmark_filter=head_dims/hd(80|96|128);;--features --benchmark_filter=features/" \
      '| head_dim | L | batch;;| head_dim |;;| shape |'
    ;;
  ab2)
    ab "64;128;256" "--fp8_prefill;;--dtypes=bf16 --head_dims=64 --seqlens=2048,4096,8192,16384" \
      '| head_dim | causal | fp8;;| dtype'
    ;;
  ab3)
    ab "128;256" "--serving --serving_head_dims=128,256 --benchmark_filter=serving/prefill/;;--mla" \
      '| head_dim | cache;;| batch | keys | heads'
    ;;
  *) sed -n '2,15p' "$0"; exit 2 ;;
esac
