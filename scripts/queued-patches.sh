#!/usr/bin/env bash
# The patches in docs/history/patches that wait for a GPU, in the order in
# which they apply together, and the device calls that test and measure
# them (docs/history/NOTES.md, the latest session's plan). Run on the
# device machine from the repository root, logs under $OUT:
#
#   scripts/queued-patches.sh test        # all applied; the whole suite (gpu-check.sh build test)
#   scripts/queued-patches.sh sanitize    # all applied; compute-sanitizer over the Sanitizer suites and the new paths' tests
#   scripts/queued-patches.sh ab1         # the standard sweep at hd64 and hd128 (512 to 16k): parent, base
#   scripts/queued-patches.sh ab2         # flash_bench --features (ALiBi and sinks against plain): parent, base
#   scripts/queued-patches.sh ab3         # hd96's head-dim rows (N 2048 causal and not, 16k): parent, base
#   scripts/queued-patches.sh ab4         # the FP8 prefill and serving prefill rows (bf16 and e4m3 caches): parent, base, all
#   scripts/queued-patches.sh ab5         # the serving prefill rows on the sm80 kernel (--backend=sm80): base, all
#   scripts/queued-patches.sh ab6         # hd128 / hd256 serving prefill, Hopper and sm80 rows: base, all (three rounds)
#   scripts/queued-patches.sh ab9         # serving prefill rows at hd64 / 128 / 256, e4m3 and bf16 caches: base, all (two rounds); then ncu of all's hd256 e4m3 row and the TMA probe
#   scripts/queued-patches.sh ab10        # serving prefill rows at hd64 / 128 / 256: base, all, all with two pairs a batch (two rounds); then ncu of all's hd256 e4m3 row (run at 19a766f, before the sector pairs landed)
#   scripts/queued-patches.sh ab11        # serving prefill rows at hd64 / 128 / 256: base, all (two rounds); then the LDGSTS source-counter probe, the TMA box probe and ncu of all's hd256 e4m3 row (run at 715f289 with the line copies)
#   scripts/queued-patches.sh ab19        # bf16 serving prefill hd64 / 256, pages in order: seqused_k's room at 20480 and at 16384 keys, the page computed (two rounds; measured: docs/perf/sm90-kv-cache.md)
#   scripts/queued-patches.sh ab20        # bf16 serving prefill hd64 / 128 / 256: the box producer's page divisions against the shifts (two rounds; run at 2acbd3d, before the shifts landed; measured: docs/perf/sm90-kv-cache.md)
#   scripts/queued-patches.sh ab21        # bf16 serving prefill hd256: divisions, the shifts (16-key pages gathered), the shifts with 16-key pages as 16-row TMA boxes (two rounds; run at 2acbd3d; measured: docs/perf/sm90-kv-cache.md)
#   scripts/queued-patches.sh ab22        # bf16 serving prefill hd64 / 128 / 256 with the shifts: the bench's shuffled pages against pages in order (two rounds; run: docs/perf/sm90-kv-cache.md "Open")
#   scripts/queued-patches.sh ab23        # decode hd128 (append rows, --decode at 4k and b32 x 32k): base, whole-block copies, the prologue loop, Q rotated in the first iteration, the lazy max, all four (two rounds; measured, not kept: docs/perf/append.md)
#   scripts/queued-patches.sh ab24        # decode hd256 (--decode): base against the code before 0ddb4eb (its plain kernel's spills grew) (two rounds; measured: docs/perf/append.md)
#   scripts/queued-patches.sh ab25        # decode hd64 (--decode): base, whole-block copies, the prologue loop, all four (their registers pass 128: a CTA an SM fewer?) (two rounds; not run: ab23 kept none of them)
#   scripts/queued-patches.sh ab26        # decode at short caches (256-4096 keys, batch 1 and 8, dense) at hd64 / 128 / 256: no split unless it saves five blocks a CTA, against the rule before (two rounds; measured, landed with four blocks above head dim 128: docs/perf/decode-splits.md)
#   scripts/queued-patches.sh ab27        # decode hd64 / 128 / 256 (dense, seqused_k; batch 1, 2, 8, 32 at 4k and 32k keys, read flush): base, the split's first blocks and Q prefetched into L2 before seqused_k lands (two rounds; measured, not kept: docs/perf/decode-splits.md)
#   scripts/queued-patches.sh ab28        # e4m3 decode hd64 / 128 / 256 (dense and paged16; batch 1, 8, 32 at 4k and 32k keys): base, the slot count capped at two CTAs an SM (two rounds; measured in ab30, landed: docs/perf/fp8-decode.md)
#   scripts/queued-patches.sh ab29        # decode hd64 / 128 / 256 (dense and paged16; batch 1, 2, 8 at 4k and 32k keys, read flush): base, the combine's CTAs started at the decode kernel's start, its lengths read before its wait (two rounds; measured in ab30, landed: docs/perf/decode-splits.md)
#   scripts/queued-patches.sh ab31        # decode hd128 bf16 (dense and paged16; batch 1, 2, 8, 32 at 4k and 32k keys, read flush; the append rows): base, 128-key blocks over eight warps, one CTA an SM (two rounds; not yet run; a probe: its host tests' hd128 split expectations are the 64-key rule's)
#   scripts/queued-patches.sh ab32        # fp8 decode (e4m3 rows, hd64 / 128, batch 1, 8, 32): base, the mma in fp16 on an fp8 cache (two rounds)
#   scripts/queued-patches.sh ab33        # decode bf16 hd64 / 128 / 256 and e4m3 hd64 / 128 (dense and paged16; batch 1, 8, 32), the append rows: base, the f16 patch, it and the paged row slots (two rounds; run at b926baf, both landed since: docs/perf/fp8-decode.md)
#   scripts/queued-patches.sh ab34        # decode bf16 and e4m3 hd64 / 128 / 256 (dense and paged16; batch 1, 8, 32): base, the paged slots read four steps at a time (two rounds; measured level, not kept: docs/perf/fp8-decode.md)
#   scripts/queued-patches.sh ab35        # e4m3 decode hd64 (dense and paged16; batch 1, 8, 32): base, four stages (two rounds; measured slower, not kept: docs/perf/fp8-decode.md)
#   scripts/queued-patches.sh ab36        # the features rows (sinks, ALiBi, append; hd64 and hd128): before, the sink read at the tile's start, it and ALiBi's slope read before the first S (two rounds; measured, both landed: docs/perf/score-features.md)
#   scripts/queued-patches.sh ncu34       # e4m3 hd64 decode, batch 32 / 8 x 32k: ncu of the code against the tree before the fp16 products and row slots (paged16 lost 6% with them; ~200 s)
#   scripts/queued-patches.sh suite       # the queued patches applied: the whole suite and the decode's sanitizer, paged and fp8 cases (~330 s)
#   scripts/queued-patches.sh ab32+test   # ab32, then the whole suite and the fp8 decode's sanitizer cases with the queued patches applied (~420 s; ab33 and suite supersede it)
#   scripts/queued-patches.sh ab28+29     # ab28, then ab29, in one call, logs under $OUT/ab28 and $OUT/ab29
#   scripts/queued-patches.sh ab30        # ab28's hd64 rows and ab29's hd64 / 128 rows (batch 1, 8) in one sweep of three builds (base, slots, early), then forced split counts of the bf16 dense decode on base's build (scripts/probes/decode-split-sweep.sh; run at f7eeafc, both landed since)
#   scripts/queued-patches.sh ncu19       # pages in order; ncu of hd256's seqused_k, paged64 and paged256 bf16 rows (ab19's question by the counters)
#   scripts/queued-patches.sh ab12        # bf16 serving prefill rows at hd64 / 256: base, the bench's pages in order, the prefetch patch, it four blocks ahead (two rounds; measured, not kept: docs/perf)
#   scripts/queued-patches.sh ab13        # hd64 serving prefill rows (bf16 and e4m3 caches): base, the fp8 cache on 192 x 96 (two rounds; measured, not kept: docs/perf)
#   scripts/queued-patches.sh ab14        # bf16 e4m3-cache serving prefill at hd128 / 256: base, K never copied (timing only, wrong output) (two rounds; measured: docs/perf/fp8-prefill.md)
#   scripts/queued-patches.sh ab15        # standard sweep hd64/128 at 2k and 16k, and bf16 serving prefill hd64/128: base, L2 hints on TMA loads (two rounds; measured, not kept: docs/perf)
#   scripts/queued-patches.sh ab16        # hd64 standard sweep at 512 / 1k / 2k: base, 128 x 128 x 3 as candidate 0 (192 x 128 as 1) (two rounds; measured, not kept: docs/perf/sm90-tiles.md)
#   scripts/queued-patches.sh kboxes-test # the e4m3 cache's K as TMA boxes (2026-12-05-fp8-cache-k-boxes): fp8-cache, paged and sanitizer suites at hd128 / 256
#   scripts/queued-patches.sh kboxes      # kboxes-test's suites, then the code against the boxes on the e4m3 serving prefill rows (two rounds), one call
#   scripts/queued-patches.sh ab17        # e4m3-cache serving prefill hd128 / 256: the code, plain-order copies, boxes (two rounds)
#   scripts/queued-patches.sh ab18        # the same rows: the code against boxes with 128-byte L2 promotion (two rounds)
#   scripts/queued-patches.sh ab21+test   # ab21, then the queued patches' GPU suite and paged sanitizer cases, one call (~450 s; run at 2acbd3d)
#   scripts/queued-patches.sh ab12+13     # ab12, then ab13, in one call (~550 s at most), logs under $OUT/ab12 and $OUT/ab13
#   scripts/queued-patches.sh ab14+15     # ab14, then ab15, in one call (~550 s at most), logs under $OUT/ab14 and $OUT/ab15
#   scripts/queued-patches.sh ab37        # the features rows without the append (hd64 and hd128): before, add_sink as one exp and one log (two rounds; measured, landed: docs/perf/score-features.md)
#   scripts/queued-patches.sh ab38        # the features rows without the append (hd64 and hd128): the sink read at the tile's end, at its start (the code), prefetched into L1 at its start (two rounds; measured, not kept: docs/perf/score-features.md)
#   scripts/queued-patches.sh ab39        # hd64 / 128 prefill at 512-2k and 16k, the features prefill rows, decode batch 1 and 8: base, 1/l and the LSE's log as MUFU forms (two rounds; measured, landed: docs/perf/sm90-short-calls.md)
#   scripts/queued-patches.sh ab40        # the ab39 prefill rows: base, the tile walk's divisions by launcher multipliers, it with ab39's patch (two rounds; not run: ab41 asked its question, both landed)
#   scripts/queued-patches.sh ab41        # hd64 / 128 prefill at 512-2k and the features prefill rows: base, the MUFU forms, the multipliers, both (two rounds; run before both landed: docs/perf/sm90-short-calls.md)
#   scripts/queued-patches.sh ab42        # the features rows and the --window rows (hd64 / 128): base, windows on has_work_after's fast path (two rounds; measured, landed: docs/perf/sm90-short-calls.md)
#   scripts/queued-patches.sh ncu72       # hd64 512 and 16k: the code, the code before the tile-end changes, the code without the MUFU forms (three rounds), then ncu of bf16 hd64 non-causal 512 before and now (~400 s; its timing rounds ran: docs/perf/sm90-short-calls.md)
#   scripts/queued-patches.sh ab43        # decode hd64 / 128 / 256 (dense, paged16; batch 1, 2, 8, 32; read flush), e4m3 decode, the append rows: base, divisions by q_per_kv and num_splits through launcher FastDivmods (two rounds)
#   scripts/queued-patches.sh h200        # on an H200: the suite, serving, fp8, FP8 prefill, bench, MLA, features, then the anchors' seed sweep if .anchors is carried; elsewhere bench, serving, features (~500 s)
#   scripts/queued-patches.sh list        # the patch files, one a line
#
# base: the tree as it is; all: base with every queued patch; parent: base
# with the patches LANDED lists taken out (what the code was before them).
# `test` and `sanitize` change the working tree (git apply); the A/Bs build copies
# (scripts/tile-sweep.sh) and leave it alone.
set -uo pipefail
# Queued for `test`, `sanitize` and `suite`, in the order they apply. ab12-ab33 name their patch files themselves.
PATCHES=(
  2026-12-07-decode-fast-divmod
)
# Landed, newest first: the code's parent is
# the tree with these taken out in this order (`parent` in ab1-ab4).
LANDED=(
  2026-12-07-window-work-after
  2026-12-07-finalize-approx
  2026-12-07-sched-fast-divmod
  2026-12-07-add-sink-short-chain
  2026-12-07-sm90-alibi-slope-early
  2026-12-07-sm90-sink-read-early
  2026-12-07-decode-paged-row-slots
  2026-12-06-fp8-decode-f16-mma
  2026-12-06-combine-early-start
  2026-12-06-fp8-paged-register-slots
  2026-12-06-decode-two-stage-bf16
  2026-12-06-paged-box-shifts
  2026-12-05-fp8-cache-sector-pairs
  2026-12-05-fp8-cache-compact-k-three-stages
  2026-12-05-sm80-paged-copy-addresses
  2026-12-05-fresh-q-descriptors
  2026-12-05-fp8-cache-copy-addresses
  2026-12-05-uniform-q-address
  2026-12-05-diagonal-live-groups
  2026-12-05-pass-hidden-blocks
)
dir=docs/history/patches
# The queued decode patches of 2026-12-06, together (ab23, ab24).
all4="@$dir/2026-12-06-decode-whole-block-copies.patch;;@$dir/2026-12-06-decode-prologue-loop.patch"
all4+=";;@$dir/2026-12-06-decode-rotate-q-in-loop.patch;;@$dir/2026-12-06-decode-lazy-max.patch"
files=()
for p in "${PATCHES[@]}"; do files+=("$dir/$p.patch"); done
spec="all:"
for f in "${files[@]}"; do spec+="@$f;;"; done
spec=${spec%;;}
parent="parent:"
for p in "${LANDED[@]}"; do parent+="-@$dir/$p.patch;;"; done
parent=${parent%;;}

apply_all() {
  for f in "${files[@]}"; do git apply "$f" || { echo "$f does not apply"; exit 1; }; done
}

# After an A/B in the same call: the queued patches applied, then the whole
# suite and the sanitizer cases matched by $1 (SANITIZE_FILTER overrides),
# under $2 seconds (TEST_CALL_TIMEOUT overrides), logs under $out/test.
suite_with_patches() {
  apply_all
  OUT=$out/test SANITIZE_FILTER=${SANITIZE_FILTER:-$1} \
    timeout "${TEST_CALL_TIMEOUT:-$2}" scripts/gpu-check.sh build test sanitize
}

# One interleaved A/B: head dims to build, then BENCH_ARGS and TABLE as
# scripts/tile-sweep.sh takes them, then the variants (tile-sweep.sh's
# "name:edits"; "base:" is the tree as it is).
ab() {
  HEAD_DIMS="$1" ROUNDS=${ROUNDS:-2} BENCH_TIMEOUT=${BENCH_TIMEOUT:-150} BENCH_ARGS="$2" TABLE="$3" \
    timeout "${AB_CALL_TIMEOUT:-590}" scripts/tile-sweep.sh "${@:4}"
  changes
}

# linear_sed and cap_sed: the serving rows on the same bytes.
# shellcheck source=scripts/serving-seds.sh
source "$(dirname "$0")/serving-seds.sh"

# Where tile-sweep.sh writes (its own default when OUT is unset).
out=${OUT:-tile-sweep-out}

# Each row's change against the first variant, from the sweep's logs.
changes() {
  [[ -f "$out/sweep-logs.tgz" ]] && scripts/sweep-compare.py "$out/sweep-logs.tgz"
}

# The serving prefill rows at head dims 64, 128 and 256 (bf16 and e4m3
# caches), interleaved over the variants given.
ab_serving() {
  ab "64;128;256" "--serving --serving_head_dims=64,128,256 --no-standard --benchmark_filter=serving/prefill/" \
    '| head_dim | cache' "$@"
}

# The features rows (sinks and ALiBi) without the append rows, at head dims
# 64 and 128, interleaved over the variants given.
ab_features() {
  ab "64;128" "--features --no-standard --benchmark_filter=features/(prefill|window|decode)" '| shape |' "$@"
}

# ncu of the "all" variant's hd256 e4m3 seqused row, on the machine that
# just built it (tile-sweep.sh leaves /tmp/variant-all): ncu's headline
# units and the L2 sectors and shared wavefronts an LDGSTS.
ncu_all_hd256() {
  [[ -x /tmp/variant-all/build/bench/flash_bench ]] || return 0
  FLASH_BENCH=/tmp/variant-all/build/bench/flash_bench HD=256 CACHES=seqused KVS=bf16-e4m3kv \
    timeout 100 scripts/ncu-serving-prefill.sh >/dev/null 2>&1
  local d
  d=$(mktemp -d)
  tar xzf "${OUT:-.}/ncu-serving-prefill-hd256.tgz" -C "$d" 2>/dev/null
  grep -hE "Duration|L2 Cache Throughput|Mem Busy|Max Bandwidth|L1/TEX Cache" "$d"/details_*.txt
  scripts/ncu-copy-sectors.py "$d"/source_hd256_bf16-e4m3kv_seqused.csv.gz 2>/dev/null | head -4
}

case "${1:-}" in
  list) for f in "${files[@]}"; do echo "$f"; done ;;
  test)
    apply_all
    timeout "${TEST_CALL_TIMEOUT:-590}" scripts/gpu-check.sh build test
    ;;
  sanitize)
    apply_all
    SANITIZE_FILTER=${SANITIZE_FILTER:-'*Sanitizer*:GraphsThreads.*:TwoStageDecode.*:*Fp8Cache*q1_*:Append.*'} \
      timeout "${TEST_CALL_TIMEOUT:-590}" scripts/gpu-check.sh build sanitize
    ;;
  ab1)
    ab "64;128" "--head_dims=64,128 --seqlens=512,1024,2048,16384 --no-standard" '| dtype' "$parent" 'base:'
    ;;
  ab2)
    ab "64;128" "--features --benchmark_filter=features/" '| shape' "$parent" 'base:'
    ;;
  ab3)
    ab "96;128" "--head_dim_rows --no-standard --benchmark_filter=head_dims/hd(96|128)" '| head_dim | N' "$parent" 'base:'
    ;;
  ab4)
    ab "64;128;256" "--fp8_prefill --no-standard;;--serving --no-standard --benchmark_filter=serving/prefill/" \
      '| head_dim | causal | fp8;;| head_dim | cache' "$parent" 'base:' "$spec"
    ;;
  ab5)
    ab "64;128;256" "--serving --no-standard --backend=sm80 --benchmark_filter=serving/prefill/bf16/" '| head_dim | cache' \
      'base:' "$spec"
    ;;
  ab9)
    # Then, on the same machine, ncu of the patched hd256 e4m3 row (are
    # the L2 sectors an LDGSTS halved?) and the TMA pair-layout probe
    # (docs/perf/fp8-prefill.md, Open).
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-440} ab_serving 'base:' "$spec"
    nvcc -std=c++17 -arch=sm_90a -o /tmp/tma-pair-box scripts/probes/tma-pair-box.cu &&
      timeout 30 /tmp/tma-pair-box | tee "${OUT:-.}/tma-pair-box.txt"
    ncu_all_hd256
    ;;
  ab11)
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-330} ab_serving 'base:' "$spec"
    timeout 90 scripts/probes/ldgsts-source-counters.sh | tee "${OUT:-.}/ldgsts-source-counters.txt"
    nvcc -std=c++17 -arch=sm_90a -o /tmp/tma-pair-box scripts/probes/tma-pair-box.cu &&
      timeout 30 /tmp/tma-pair-box | tee "${OUT:-.}/tma-pair-box.txt"
    ncu_all_hd256
    ;;
  kboxes-test)
    # docs/history/patches/2026-12-05-fp8-cache-k-boxes.patch (the e4m3
    # cache's K as TMA boxes) applied: the fp8-cache, paged and sanitizer
    # suites on a head-dim 128 / 256 build.
    git apply "$dir/2026-12-05-fp8-cache-k-boxes.patch" || exit 1
    HEAD_DIMS="128;256" TEST_FILTER='*Fp8*:*Sanitizer*:*PagedKv*' \
      timeout "${TEST_CALL_TIMEOUT:-590}" scripts/gpu-check.sh build test
    ;;
  kboxes)
    # One call: kboxes-test's suites with the patch applied while the code
    # without it builds beside them; then both flash_bench builds
    # interleaved, two rounds, on the e4m3 serving prefill rows.
    mkdir -p "$out"
    old=/tmp/kboxes-old
    rm -rf "$old" && mkdir -p "$old"
    tar --exclude=./build --exclude=./.git -cf - . | tar -C "$old" -xf -
    (cmake -S "$old" -B "$old/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
       -DFLASH_HEAD_DIMS="128;256" -DFLASH_BUILD_TESTS=OFF -DFLASH_BUILD_EXAMPLES=OFF &&
     cmake --build "$old/build" -j 8 --target flash_bench) >"$out/build-old.log" 2>&1 &
    builder=$!
    git apply "$dir/2026-12-05-fp8-cache-k-boxes.patch" || exit 1
    OUT=$out HEAD_DIMS="128;256" TEST_FILTER='*Fp8*:*Sanitizer*:*PagedKv*' \
      timeout "${TEST_CALL_TIMEOUT:-300}" scripts/gpu-check.sh build test
    wait "$builder" || { echo "old build FAILED"; tail -5 "$out/build-old.log"; }
    for round in 1 2; do
      for v in old boxes; do
        bin=build/gpu-check/bench/flash_bench
        [[ $v == old ]] && bin=$old/build/bench/flash_bench
        timeout 90 "$bin" --no-standard --serving --serving_head_dims=128,256 \
          --benchmark_filter=serving/prefill/bf16-e4m3kv/ >"$out/bench-$v-$round.log" 2>&1
        echo "## $v round $round"
        sed -n '/^| head_dim | cache/,/^$/p' "$out/bench-$v-$round.log" | sed '1,2d'
      done
    done
    ;;
  ab17)
    # The e4m3 cache's K: old (the code), copies (the patch without boxes:
    # K copied in the plain order), boxes (the patch).
    ab "128;256" "--serving --serving_head_dims=128,256 --no-standard --benchmark_filter=serving/prefill/bf16-e4m3kv/" \
      '| head_dim | cache' 'old:' \
      "copies:@$dir/2026-12-05-fp8-cache-k-boxes.patch;;kernels/sm90/api.h:s/kFp8CacheKBoxes = true/kFp8CacheKBoxes = false/" \
      "boxes:@$dir/2026-12-05-fp8-cache-k-boxes.patch"
    ;;
  ab18)
    # K as boxes with the tensor maps' L2 promotion at 128 bytes (an e4m3
    # row of one head at hd128 is 128 bytes; 256-byte promotion may fetch
    # the neighbouring head's row too) against the code. HEAD_DIMS_18 and
    # SERVING_HDS_18 narrow it (e.g. 128 alone).
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-400} ab "${HEAD_DIMS_18:-128;256}" \
      "--serving --serving_head_dims=${SERVING_HDS_18:-128,256} --no-standard --benchmark_filter=serving/prefill/bf16-e4m3kv/" \
      '| head_dim | cache' 'old:' \
      "b128:@$dir/2026-12-05-fp8-cache-k-boxes.patch;;kernels/sm90/tensor_map.cpp:s/CU_TENSOR_MAP_L2_PROMOTION_L2_256B/CU_TENSOR_MAP_L2_PROMOTION_L2_128B/"
    ;;
  ab20)
    # Issue 25: CacheProducer's page index and row by division (the code)
    # against page_of_key's shift for power-of-two pages (the patch).
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-420} ab "${HEAD_DIMS_20:-64;128;256}" \
      "--serving --serving_head_dims=${SERVING_HDS_20:-64,128,256} --no-standard --benchmark_filter=serving/prefill/bf16/" \
      '| head_dim | cache' 'base:' "shifts:@$dir/2026-12-06-paged-box-shifts.patch"
    ;;
  ab21)
    # Issue 25: at head dim 256 the code gathers pages that box into
    # 16-row boxes (16-, 48-key pages), measured against boxes while the
    # box producer divides by the page size. "shifts" is ab20's patch;
    # "box16" boxes those pages on top of it.
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-300} ab "256" \
      "--serving --serving_head_dims=256 --no-standard --benchmark_filter=serving/prefill/bf16/" \
      '| head_dim | cache' 'base:' "shifts:@$dir/2026-12-06-paged-box-shifts.patch" \
      "box16:@$dir/2026-12-06-paged-box-shifts.patch;;kernels/sm90/tma_limits.h:s/paged_box_rows(page_size, block_n) < 32;/paged_box_rows(page_size, block_n) < 16;/"
    ;;
  ab23)
    # Issue 25: at batch 1 the decode kernel is latency bound, one warp a
    # scheduler (docs/perf/append.md, "Code size"). whole: a block whose
    # rows all hold keys copied without load_tile's per-row checks and
    # selects (the hd128 loop's dense copies 146 -> ~70 instructions);
    # loop: the prologue's stage loop not unrolled (less code fetched
    # cold); rotq: Q's rotation in the first iteration, after the next
    # block's copies are issued (append + rotary is 1.07x plain at 1 x 4k);
    # lazy: OnlineSoftmax's lazy max, O rescaled only when a row's max
    # grows by more than 2^8 (64 FMULs a block a thread at hd128 skipped).
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-560} ab "128" \
      "--features --benchmark_filter=features/append --l2_flush=read;;--decode --l2_flush=read --benchmark_filter=/L4096/|/B32/L32768/" \
      '| shape | kernel | plain us;;| head_dim | L | batch' 'base:' \
      "whole:@$dir/2026-12-06-decode-whole-block-copies.patch" \
      "loop:@$dir/2026-12-06-decode-prologue-loop.patch" \
      "rotq:@$dir/2026-12-06-decode-rotate-q-in-loop.patch" \
      "lazy:@$dir/2026-12-06-decode-lazy-max.patch" \
      "all4:$all4"
    ;;
  ab24)
    # hd256 decode: 0ddb4eb grew the plain kernel's spills (16 -> 36
    # bytes); "before" is the decode code of 5d53392. Of the queued
    # patches only the lazy max changes hd256's plain kernels (two stages;
    # its tile takes load_tile).
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-560} ab "256" \
      "--decode --decode_head_dims=256 --l2_flush=read" '| head_dim | L | batch' 'base:' \
      "before:-@$dir/2026-12-06-decode-append-code-size.patch"
    ;;
  ab25)
    # hd64 decode: the whole-block copies and the prologue loop take some
    # hd64 kernels past 128 registers (masked 128 -> 131, kWrites 126 ->
    # 156), which may leave three CTAs an SM where shared memory fits
    # four.
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-560} ab "64" \
      "--decode --decode_head_dims=64 --l2_flush=read" '| head_dim | L | batch' 'base:' \
      "whole:@$dir/2026-12-06-decode-whole-block-copies.patch" \
      "loop:@$dir/2026-12-06-decode-prologue-loop.patch" "all4:$all4"
    ;;
  ab26)
    # Issue 25: at batch 1 the combine kernel a split adds costs about as
    # much as five 64-key blocks of one decode CTA (H100: 7.4 us for 128
    # keys unsplit, 10.5 split in two; 0.6-0.7 us a block a CTA), so 256
    # keys split in two ran 10.5 us against 8.7-9.1 unsplit.
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-560} ab "64;128;256" \
      "--decode --decode_head_dims=64,128,256 --decode_seqlens=256,384,512,1024,4096 --decode_batches=1,8 --l2_flush=read --benchmark_filter=(read_bandwidth|dense)" \
      '| head_dim | L | batch' "before:-@$dir/2026-12-06-decode-short-cache-splits.patch" 'rule:'
    ;;
  ab27)
    # Issue 25: a decode CTA copies its first K/V blocks only once
    # seqused_k has landed (the split's range depends on it), so a
    # batch-1 call waits on two DRAM round trips before its first block.
    # The patch prefetches the blocks the allocation's length places first
    # (and Q's rows) into L2 while seqused_k is in flight. Prediction: batch
    # 1 and 2 dense 0.3-0.7 us faster at 4k and 32k; batch 32 level.
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-560} ab "64;128;256" \
      "--decode --decode_head_dims=64,128,256 --decode_batches=1,2,8,32 --l2_flush=read --benchmark_filter=(read_bandwidth|dense)" \
      '| head_dim | L | batch' 'base:' "prefetch:@$dir/2026-12-06-decode-prefetch-first-blocks.patch"
    ;;
  ab28)
    # Issue 27: the slot rule counts four head-dim-64 e4m3 CTAs an SM by
    # shared memory where the counts measured fastest give two (fp8-decode.md, "Split counts
    # on a paged head-dim-64 cache"). Prediction: hd64 paged16 batch 32 x
    # 32k 618 -> ~477 us, batch 8 x 32k 165 -> ~133; batch 1 x 32k (63 ->
    # 32 splits) within 5%; dense rows and head dims 128 / 256 unchanged
    # (their counts do not move).
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-560} ab "64;128;256" \
      "--fp8 --no-standard --decode_head_dims=64,128,256 --decode_batches=1,8,32 --benchmark_filter=e4m3kv" \
      '| head_dim | L | batch' 'base:' "slots:@$dir/2026-12-06-fp8-paged-register-slots.patch"
    ;;
  ab29)
    # Issue 25: the combine kernel, a programmatic dependent of the decode
    # kernel, launches only once every decode CTA has passed its main loop,
    # then reads the query lengths before it can wait. The patch triggers it
    # at the decode kernel's start and reads what it needs of the call's
    # inputs before griddepcontrol.wait, so its CTAs sit resident and ready
    # when the last split lands. Prediction: split rows (batch 1, 2, 8)
    # 0.2-0.7 us faster; batch 32 (unsplit) level.
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-560} ab "64;128;256" \
      "--decode --decode_head_dims=64,128,256 --decode_batches=1,2,8 --l2_flush=read --benchmark_filter=(read_bandwidth|dense|paged16)" \
      '| head_dim | L | batch' 'base:' "early:@$dir/2026-12-06-combine-early-start.patch"
    ;;
  ab30)
    # ab28 and ab29 on fewer rows, one sweep: the slot cap moves only head
    # dim 64's counts, the early start only split rows.
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-440} ab "64;128" \
      "--fp8 --decode_head_dims=64 --decode_batches=1,8,32 --benchmark_filter=e4m3kv;;--decode --decode_head_dims=64,128 --decode_batches=1,8 --l2_flush=read --benchmark_filter=(read_bandwidth|dense|paged16)" \
      '| head_dim | L | batch;;| head_dim | L | batch' 'base:' \
      "slots:@$dir/2026-12-06-fp8-paged-register-slots.patch" "early:@$dir/2026-12-06-combine-early-start.patch"
    echo "## forced split counts, bf16 dense decode (base's build)"
    FLASH_BENCH=/tmp/variant-base/build/bench/flash_bench HDS="64;128" SPLITS="${SPLITS_30:-0 15 30 45}" \
      timeout "${PROBE_TIMEOUT:-120}" scripts/probes/decode-split-sweep.sh
    ;;
  ab31)
    # Issue 25: batch-1 decode is bound by instruction latency with one
    # warp a scheduler (decode-splits.md, "Where a one-launch call's time
    # goes"): a split's CTA runs its 64-key blocks one after another on
    # four warps. The probe gives hd128 bf16/fp16 128-key blocks over
    # eight warps (16 keys a warp, as now; 196 KiB, one CTA an SM): half
    # the blocks a split, two warps a scheduler, twice the bytes in flight
    # a CTA, the same number of CTAs and partials. Prediction: batch 1 x 4k
    # 1-2 us faster, batch 1 x 32k 2-5 us; batch 32 (two waves of one CTA
    # an SM where two CTAs an SM ran one) level or slower.
    # The append rows run the same kernels' kWrites form (issue 25's
    # append + rotary at 1.05x).
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-400} ab "128" \
      "--decode --decode_head_dims=128 --decode_batches=1,2,8,32 --l2_flush=read --benchmark_filter=(read_bandwidth|dense|paged16);;--features --benchmark_filter=features/append --l2_flush=read" \
      '| head_dim | L | batch;;| shape | kernel | plain us' 'base:' "wide:@$dir/2026-12-06-decode-wide-blocks.patch"
    ;;
  ab32)
    # Issue 27: the fp8 decode kernel is bound by its instruction stream
    # (ncu on the H200, hd128 batch 32 x 32k: 57% of issue slots, the ALU
    # pipe 54%) and, run back to back, by the H200's 700 W cap (the SM
    # clock falls to 1.45-1.53 GHz). The patch runs its mma in fp16 on an
    # fp8 cache whatever Q's type: e4m3 pairs widen by cvt (one
    # F2FP a pair, no PRMT / IMAD / HMUL2), a bf16 Q row enters fp16 by a
    # power of two folded into the score factor. ptxas (sm_90a): hd128
    # 219-243 -> 166-188 registers, hd64 163-179 -> 130-148, no spills;
    # SASS of the plain hd128 kernel 3760 -> 3440 instructions (about 420
    # fewer in the key loop). Prediction: hd128 batch 32 x 32k 570 -> 480-
    # 520 us on the H200 (0.84 -> 0.92-0.99 of the ceiling), hd64 batch 32
    # 0.59 -> 0.70-0.85, paged16 rows as much or more; batch 1 level to
    # 10% faster.
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-330} ab "64;128" \
      "--fp8 --no-standard --decode_head_dims=64,128 --decode_batches=1,8,32 --benchmark_filter=e4m3kv" \
      '| head_dim | L | batch' 'base:' "f16:@$dir/2026-12-06-fp8-decode-f16-mma.patch"
    ;;
  ab32+test)
    # ab32 first (it copies the tree as it is), then the whole suite and
    # the fp8 decode's sanitizer cases with the queued patches (PATCHES)
    # applied, in one call (about 420 s on an H200).
    OUT=$out/ab32 AB_CALL_TIMEOUT=200 "$0" ab32
    suite_with_patches '*Sanitizer*:TwoStageDecode.*:*Fp8Cache*q1_*' 330
    ;;
  ab33)
    # Issues 25 and 27: a paged decode block's copies cost more than a
    # dense one's (SASS: four SHFL, 64-bit bounds tests, selects and moves
    # a step's pair of 16-byte copies; e4m3 hd128 with the f16 patch, 256
    # instructions a thread a block against a dense block's 146), and
    # paged16 runs 0.87x dense at bf16 hd64 batch 32 x 32k and 0.82x on an
    # e4m3 cache. The rows patch hands the copying lanes each row's K and V
    # source addresses through 16 bytes of shared memory a row (one
    # LDS.128 a step; block_n x 16 bytes a CTA) instead of four shuffles.
    # SASS (sm_90a): SHFL 104 -> 8, whole kernels 250-410 instructions
    # shorter (bf16 hd128 3192 -> 2896, e4m3 hd128 3440 -> 3096 with the
    # f16 patch beneath), no spills; registers +0-13, but hd64 bf16's
    # kWrites kernel 126 -> 155 (four CTAs an SM to three). Three
    # variants: base, the f16 patch (ab32), both. Prediction: paged16 rows
    # 3-10% faster than f16's (bf16 hd64 batch 32 0.87x -> 0.92-0.97x
    # dense; e4m3 paged16 0.82x -> 0.88-0.95x), dense rows level.
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-590} ab "64;128;256" \
      "--decode --decode_head_dims=64,128,256 --decode_batches=1,8,32 --benchmark_filter=(read_bandwidth|dense|paged16);;--fp8 --no-standard --decode_head_dims=64,128 --decode_batches=1,8,32 --benchmark_filter=e4m3kv;;--features --benchmark_filter=features/append" \
      '| head_dim | L | batch;;| head_dim | L | batch;;| shape | kernel | plain us' 'base:' \
      "f16:@$dir/2026-12-06-fp8-decode-f16-mma.patch" \
      "rows:@$dir/2026-12-06-fp8-decode-f16-mma.patch;;@$dir/2026-12-07-decode-paged-row-slots.patch"
    ;;
  ab34)
    # Issues 25 and 27: the paged decode's copying lanes read a step's K
    # and V source addresses from shared memory (PagedRows) just before
    # that step's two cp.async, and no read can move above an earlier
    # copy (a copy writes shared memory), so each step waits on its own
    # read's latency: SASS (sm_90a) of the e4m3 hd128 kernel shows
    # LDS.128, about 13 instructions, the step's LDGSTS pair, then the
    # next LDS, eight times a block. The patch reads four steps' slots,
    # then issues their eight copies: two exposed reads a block instead
    # of eight (kIters / 4). Registers equal or fewer in every decode
    # kernel but one (e4m3 hd256 two-stage score-modifier 226 -> 228), no
    # new spills (hd256 bf16's kWrites split kernel 12/36 -> 12/12 bytes);
    # 8-88 instructions fewer a kernel, except 16-80 more in the
    # three-stage bf16 hd128 and e4m3 hd256 kernels without kWrites
    # (nvcc 13.0, bf16 hd32/64/128/256, e4m3 hd64/128/256). Prediction:
    # paged16 rows 0-3% faster (most where few warps share an SM: batch
    # 1 and 8), dense rows level (their copies do not change).
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-500} ab "64;128;256" \
      "--decode --decode_head_dims=64,128,256 --decode_batches=1,8,32 --benchmark_filter=(read_bandwidth|dense|paged16);;--fp8 --no-standard --decode_head_dims=64,128,256 --decode_batches=1,8,32 --benchmark_filter=e4m3kv" \
      '| head_dim | L | batch;;| head_dim | L | batch' 'base:' \
      "grouped:@$dir/2026-12-07-decode-slot-reads-grouped.patch"
    ;;
  ab35)
    # Issue 27: at two CTAs an SM the e4m3 hd64 decode kernel waits on
    # DRAM (ncu34: 65% of DRAM peak, 35-55% of each warp's wait on L1TEX,
    # 1.9 warps a scheduler; fp8-decode.md, "The lost hd64 rows in the
    # counters"). Four stages keep three 16 KiB blocks in flight a CTA
    # instead of two: 68 KiB, three CTAs an SM by shared memory and by
    # registers (ptxas sm_90a, nvcc 13.0: 124-140 a thread against
    # 132-150, no spills). Prediction: batch 32 x 32k (dense and
    # paged16, unsplit, two CTAs an SM) 10-20% faster, from 0.69 of the
    # read ceiling toward 0.8; batch 8 4-10%; batch 1 level.
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-400} ab "64" \
      "--fp8 --no-standard --decode_head_dims=64 --decode_batches=1,8,32 --benchmark_filter=e4m3kv" \
      '| head_dim | L | batch' 'base:' \
      "four:@$dir/2026-12-07-fp8-decode-hd64-four-stages.patch"
    ;;
  ab36)
    # Issue 26: sinks cost 4.5% on gpt-oss's 128-key window call (hd64,
    # heads 64/8, N 8192: 0.1790 -> 0.1870 ms, H100, session 70; the H200's
    # sinks rows read 0.99-1.045 in session 66) and 1% or less on the long
    # causal rows.
    # The Hopper kernel read the sink in the epilogue, a global load on
    # the path from each tile's last P V to its store; the window call's
    # tiles are short (about 21 a CTA, two or three key blocks each), so
    # one exposed load a tile is a few percent of it. The patch reads the
    # sink with the descales when the tile starts (SASS, sm_90a, nvcc
    # 13.0, bf16 hd64: the LDG moves from after the HGMMAs to before the
    # first; registers and stack unchanged in all 33 kernels). Prediction:
    # the window row's sinks cost 1.045 -> 1.00-1.02, the causal and
    # decode rows and every plain row level (within 1%).
    # The third variant adds 2026-12-07-sm90-alibi-slope-early: run_tile
    # read ALiBi's slope after the first S's wait (and, on the tensor-core
    # form, once more before it), an exposed load a tile; the patch reads
    # it once, before the first S's GEMM (SASS, sm_90a, bf16 hd128: the
    # LDG moves ahead of the first S's wait; the 128 x 176 general
    # score-modifier kernel's 72/104 bytes of spill go to 0, every other
    # kernel's registers and stack unchanged). Prediction: ALiBi rows
    # 0-1% faster (hd128 1.059 toward 1.05), plain rows level.
    # Measured (H100, session 71, two calls of two rounds): the window
    # row's sinks cost 1.044-1.049 -> 1.028-1.037, the ALiBi rows level
    # within the rounds' spread; both landed (score-features.md). The
    # variants now take the patches out of the landed tree.
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-450} ab "64;128" \
      "--features --no-standard --benchmark_filter=features/" \
      '| shape |' \
      "base:-@$dir/2026-12-07-sm90-alibi-slope-early.patch;;-@$dir/2026-12-07-sm90-sink-read-early.patch" \
      "early:-@$dir/2026-12-07-sm90-alibi-slope-early.patch" \
      'slope:'
    ;;
  ab37)
    # Issue 26: with the sink read when the tile starts (ab36), the
    # 128-key window row's sinks still cost 1.03 (H100, session 71), the
    # issue's bound 1.03. What is left on the tile's path is add_sink
    # itself, between the last P V and the store: three precise
    # transcendentals in a dependent chain (expf, logf, expf; 60 SASS
    # instructions a row). The patch computes the same from e =
    # exp(-|lse - sink|): lse' = max + log(1 + e), O's factor 1/(1+e) or
    # e/(1+e), with __expf, __logf and __fdividef (sm_90a: 15
    # instructions, two MUFU deep). Every kernel's add_sink (Hopper, sm80,
    # decode, MLA) takes it. Prediction: about 150 cycles off each tile's
    # end, ~21 tiles a CTA on the window row: its sinks cost 1.03 ->
    # 1.02-1.025; the causal rows (4-10 tiles a CTA) and the decode row
    # level; plain rows untouched (add_sink runs only with sinks).
    # Measured (H100, session 71, two rounds): the window row's sinks
    # cost 1.033, 1.043 -> 1.016, 1.011, the rest level; landed
    # (score-features.md). "before" takes it out of the landed tree.
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-300} ab_features \
      "before:-@$dir/2026-12-07-add-sink-short-chain.patch" 'short:'
    ;;
  ab38)
    # Issue 26 / code quality: the sink read when the tile starts (landed,
    # ab36) holds the sink in a register across the key loop, and two
    # kernels spill for it (ptxas, sm_90a): hd96's 192 x 96 causal kernel
    # (its first candidate) 4 bytes, hd256's 128 x 64 score-modifier
    # causal kernel 8; one STL and two LDL a tile. The prefetch patch
    # holds nothing: prefetch.global.L1 of the sink's line when the tile
    # starts, the load at its end; both files compile without spills.
    # Prediction: "prefetch" within 0.5% of "early" on every row (the end
    # load an L1 hit), both ahead of "late" on the window row's sinks.
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-400} ab_features \
      "late:-@$dir/2026-12-07-sm90-sink-read-early.patch" 'early:' \
      "prefetch:@$dir/2026-12-07-sm90-sink-prefetch.patch"
    ;;
  ab39)
    # Issue 29 (short calls) and 25 (batch-1 decode): add_sink as one exp
    # and one log (ab37) took 2.5% off the 128-key window call's sinks
    # row (about 0.2 us a tile of ~8.5, for ~45 instructions a row less
    # at the tile's end). Every tile's end also runs the row's precise
    # 1/l and logf (a nine-deep FFMA polynomial and a division with its
    # range branch and slow-path call; ~35 instructions a row). The patch
    # takes both as MUFU forms (rcp.approx, lg2.approx; ptx::finalize_row)
    # in OnlineSoftmax::finalize_sums (Hopper, sm80, MLA decode), the
    # decode kernel's merge and the Hopper MLA kernel. SASS, sm_90a:
    # fwd_bf16_hd64's kernels 138-149 instructions fewer (one 61), the
    # bf16 hd128 decode kernels 184-187 fewer. Spills over the whole
    # release build (80;90a, with ab40's patch too): the sm80 paged
    # hd128 kernels 32/36 -> 40/44 bytes, sm80 hd256 64 x 32 causal
    # 16 -> 20 (sm_80 code), every other kernel unchanged; the release
    # build's host tests (969 entries, 218 passed, 751 skipped) pass.
    # Prediction: short prefill cells (512-2k, ~23 tiles a CTA at hd64)
    # 1-2% faster; 16k level (within 0.5%); the window row's plain call
    # 1.5-2.5% faster; decode batch 1 x 4k 0.1-0.3 us faster; batch 8
    # level.
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-450} ab "64;128" \
      "--head_dims=64,128 --seqlens=512,1024,2048,16384 --no-standard;;--features --no-standard --benchmark_filter=features/(prefill|window);;--decode --decode_batches=1,8 --decode_seqlens=4096,32768 --l2_flush=read --benchmark_filter=(read_bandwidth|dense)" \
      '| dtype;;| shape |;;| head_dim | L | batch' 'base:' \
      "fin:@$dir/2026-12-07-finalize-approx.patch"
    ;;
  ab40)
    # Issue 29 (short calls): the same question as ab39 for the tile
    # walk. Each tile of the padded numbering divides by runtime values
    # three or four times (tiles_in_unit and tile(): the unit by a
    # head's pairs, the (batch x head) index by heads_q; ~20 SASS
    # instructions and a MUFU.RCP each, two of them in a chain on the
    # consumer's path from one tile's store to the next tile's first S).
    # The patch divides by launcher-computed multipliers
    # (common/fast_divmod.h: a multiply-high and a shift; host tests
    # against the division operator and UnitMap::locate either way).
    # SASS, sm_90a, fwd_bf16_hd64: 95-209 instructions fewer a kernel
    # (one split kernel 40 more), registers and spills unchanged. Not in
    # the KV-cache kernels (TileScheduler's kFastDiv), where it made
    # hd256's causal cache kernel spill 12 bytes; hd256's 128 x 64
    # score-modifier causal kernel spills 16 bytes with it, 8 without.
    # Prediction: prefill 512-2k 0.5-1.5% faster, more with "both" (and
    # ab39's figure for fin alone), 16k and decode level. A FastDiv of
    # the same divisions measured within the spread at 2k in session 10
    # (docs/history/NOTES.md, session 10; 8 bytes more spill in masked kernels);
    # worth running only where ab39 gains.
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-560} ab "64;128" \
      "--head_dims=64,128 --seqlens=512,1024,2048,16384 --no-standard;;--features --no-standard --benchmark_filter=features/(prefill|window)" \
      '| dtype;;| shape |' 'base:' \
      "div:@$dir/2026-12-07-sched-fast-divmod.patch" \
      "both:@$dir/2026-12-07-sched-fast-divmod.patch;;@$dir/2026-12-07-finalize-approx.patch"
    ;;
  ab41)
    # Issue 29 (short calls): ab39 and ab40's questions in one sweep, the
    # short prefill rows only (ab39 read 16k and decode level): base, the
    # MUFU forms, the multipliers, both.
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-540} ab "64;128" \
      "--head_dims=64,128 --seqlens=512,1024,2048 --no-standard;;--features --no-standard --benchmark_filter=features/(prefill|window)" \
      '| dtype;;| shape |' 'base:' \
      "fin:@$dir/2026-12-07-finalize-approx.patch" \
      "div:@$dir/2026-12-07-sched-fast-divmod.patch" \
      "both:@$dir/2026-12-07-sched-fast-divmod.patch;;@$dir/2026-12-07-finalize-approx.patch"
    ;;
  ab42)
    # Issue 26 / serving (gpt-oss's sliding layers): with a left window
    # edge, each tile's has_work_after took its slow path, a second full
    # tile() (the walk, the sequence, the window's visible blocks) on the
    # consumers' path between the Q wait and the first S. The patch lets
    # windows take the fast path wherever masked calls already did (dense,
    # seqlen_k >= seqlen_q): every row still sees its diagonal key. SASS,
    # sm_90a, fwd_bf16_hd64: the nine window kernels (ALiBi's among them)
    # 56-64 instructions longer (the fast path beside the slow one varlen
    # keeps), registers and spills unchanged; every other kernel's
    # instruction count and registers unchanged. fwd_bf16_hd128: the four
    # window kernels 112-288 instructions longer, and the 128 x 176
    # score-modifier window kernel (a runner-up candidate, not the plan's
    # first) spills 96 bytes where it spilled none.
    # Prediction: the 128-key window rows 2-4% faster (plain, sinks and
    # ALiBi alike), the W 1024 / 4096 rows at 16k 0-1%, causal rows level.
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-400} ab "64;128" \
      "--features --no-standard --benchmark_filter=features/(prefill|window);;--window --no-standard" \
      '| shape |;;| W |' 'base:' "after:@$dir/2026-12-07-window-work-after.patch"
    ;;
  ncu72)
    # Issue 29: hd64's non-causal 512-2k cells read 0.5-2.1% slower with
    # the tile end's MUFU forms, where their kernels keep their registers
    # and lose 230-310 instructions (sm90-short-calls.md, "The tile's end
    # and its walk"); and 16k has not run with both changes. Builds the
    # code, the code before both and the code without the MUFU forms
    # ("div") at hd64, times 512 and 16k over three rounds,
    # then ncu of bf16 hd64 non-causal 512 before and now, and each one's
    # stalls by role (ncu-stalls-by-role.py matches lines by offset, which
    # holds only within one binary: read its two summaries) (~400 s).
    o=$(realpath -m "$out")
    HEAD_DIMS=64 ROUNDS=3 BENCH_TIMEOUT=60 BENCH_ARGS="--head_dims=64 --seqlens=512,16384" \
      timeout 330 scripts/tile-sweep.sh \
      "before:-@$dir/2026-12-07-finalize-approx.patch;;-@$dir/2026-12-07-sched-fast-divmod.patch" 'code:' \
      "div:-@$dir/2026-12-07-finalize-approx.patch"
    changes
    for v in before code; do
      b=/tmp/variant-$v/build/bench/flash_bench
      [[ -x $b ]] || { echo "no $b"; continue; }
      ncu --clock-control none -k regex:fwd_kernel --launch-skip 2 --launch-count 1 --section SpeedOfLight \
        --section WarpStateStats --section SchedulerStats --section InstructionStats --section SourceCounters \
        --import-source no --export "$o/ncu_$v" --force-overwrite \
        "$b" --no-standard --head_dims=64 --dtypes=bf16 --seqlens=512 --flash_iters=4 --gemm_iters=1 \
        --benchmark_filter='flash/bf16/hd64/noncausal/N512(/|$)' >"$o/ncu_$v.txt" 2>&1
      echo "== $v"
      ncu --import "$o/ncu_$v.ncu-rep" --page details 2>&1 |
        grep -E "Duration|Issue Slots Busy|Executed Ipc Active|No Eligible|Eligible Warps|Warp Cycles Per Issued|Executed Instructions  " | head -12
      ncu --import "$o/ncu_$v.ncu-rep" --page source --csv --print-source sass 2>/dev/null | gzip >"$o/source_$v.csv.gz"
    done
    [[ -f "$o/source_code.csv.gz" && -f "$o/source_before.csv.gz" ]] &&
      scripts/ncu-stalls-by-role.py "$o/source_code.csv.gz" 15 --against "$o/source_before.csv.gz" 2>&1 | head -80
    ;;
  ncu34)
    # Issue 27: with the fp16 products (and the row slots) the e4m3 hd64
    # paged16 rows at 32k keys lost 6% (batch 32 unsplit 481.6 -> 510.1
    # us, batch 8 on four splits 132.4 -> 140.8; H100, session 68, ab33),
    # where every split count below four got faster and the dense rows
    # did too (fp8-decode.md, "fp16 products and row slots"). Counters of
    # both trees on those rows and the dense batch-32 row: DRAM
    # throughput, L2 hit rate, stalls and issue, side by side.
    before=/tmp/before34 here=$PWD o=$(realpath -m "$out")
    rm -rf "$before" && mkdir -p "$before" "$o"
    tar --exclude=./build --exclude=./.git -cf - . | tar -C "$before" -xf -
    (cd "$before" && git apply -R "$here/$dir/2026-12-07-decode-paged-row-slots.patch" &&
      git apply -R "$here/$dir/2026-12-06-fp8-decode-f16-mma.patch") || { echo "the patches do not reverse"; exit 1; }
    rows="B32/L32768/paged16 B8/L32768/paged16 B32/L32768/dense"
    echo "### now"
    OUT=$o/ncu-now HD=64 KVS=bf16-e4m3kv ROWS="$rows" timeout 140 scripts/ncu-decode.sh
    echo "### before"
    (cd "$before" && OUT=$o/ncu-before HD=64 KVS=bf16-e4m3kv ROWS="$rows" timeout 140 scripts/ncu-decode.sh)
    tar czf "$o/ncu34.tgz" -C "$o" ncu-now ncu-before && rm -rf "$o/ncu-now" "$o/ncu-before"
    ;;
  suite)
    # The queued patches applied; the whole suite, then compute-sanitizer
    # over the decode kernel's sanitizer, paged and fp8 cases (~330 s).
    suite_with_patches '*Sanitizer*:TwoStageDecode.*:*Fp8Cache*q1_*:*PagedKv*dense_q_pages1*' 500
    ;;
  ab43)
    # Issues 25 and 27: at batch 1 a decode CTA's once-a-warp code (about
    # 1,100 instructions: lengths, offsets, Q's copies, the merge and the
    # store) is the floor (decode-splits.md), and about a fifth of it was
    # runtime divisions by q_per_kv and num_splits (a token and head from
    # each packed row, the split from blockIdx.x, the split's share):
    # 10-12 a thread on the dense path, ~20 instructions each. The patch
    # divides through FastDivmods the launcher puts in FwdParams
    # (decode_g_div, decode_splits_div). SASS (sm_90a, nvcc 13.0): bf16
    # hd128's default kernel 2,624 -> 2,448 instructions (I2F.RP + MUFU.RCP
    # pairs 15 -> 4, those left are the paged divisions by a page size
    # that is no power of two); the kernels without the append counted
    # (bf16 hd32, 64, 128, e4m3 hd128) 120-224 shorter, registers -6 to
    # +8; over all 176 decode and combine kernels none spills more and
    # hd256's spill less (36 -> 24 bytes the default). Its test rows: GQA groups of 3 and 5
    # with sinks, ALiBi and a window (DecodeShapes). Prediction: batch 1
    # and 2 rows 0.2-0.5 us faster (1-3% at 4k keys), batch 8 and 32
    # level to +1%, the append rows alike.
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-560} ab "64;128;256" \
      "--decode --decode_head_dims=64,128,256 --decode_batches=1,2,8,32 --l2_flush=read --benchmark_filter=(read_bandwidth|dense|paged16);;--fp8 --no-standard --decode_head_dims=64,128 --decode_batches=1,8,32 --benchmark_filter=e4m3kv;;--features --benchmark_filter=features/append" \
      '| head_dim | L | batch;;| head_dim | L | batch;;| shape | kernel | plain us' 'base:' \
      "div:@$dir/2026-12-07-decode-fast-divmod.patch"
    ;;
  h200)
    # The issues' H200 figures in one call (~500 s): on an H200 the whole
    # suite and the serving, fp8, FP8 prefill, standard, MLA and features
    # tables, then the seed sweep against cuDNN and FlashAttention-4 when
    # .anchors/fa4-wheels.tar.xz was carried (../shared/anchors/README.md);
    # on any other card the standard, serving and features tables only.
    mkdir -p "$out"
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
      OUT=$out/gc timeout 330 scripts/gpu-check.sh build test serving fp8 fp8prefill bench mla features \
        >"$out/gc.txt" 2>&1
      tail -c 7000 "$out/gc.txt"
      if [[ -f .anchors/fa4-wheels.tar.xz ]]; then
        OUT=$out/anchors BUNDLE=fa4 COMPARE_ARGS="--seed --libs flash,cudnn,fa4" COMPARE_TIMEOUT=180 \
          timeout 220 scripts/compare-anchors.sh >"$out/anchors.txt" 2>&1
        tail -c 4000 "$out/anchors.txt"
      fi
    else
      nvidia-smi --query-gpu=name --format=csv,noheader
      OUT=$out/gc timeout 400 scripts/gpu-check.sh build bench serving features >"$out/gc.txt" 2>&1
      tail -c 9000 "$out/gc.txt"
    fi
    ;;
  ab28+29)
    OUT=$out/ab28 AB_CALL_TIMEOUT=290 "$0" ab28
    OUT=$out/ab29 AB_CALL_TIMEOUT=290 "$0" ab29
    ;;
  ab22)
    # Issue 25: with the shifts, hd256's pages of 256 read 0.98 of
    # seqused_k and pages of 64 0.91 (sm90-kv-cache.md, "The shifts
    # measured"). Both load one 64-row box a block; they differ in how
    # many consecutive blocks share a page of the shuffled table. "linear"
    # puts the pages in order (the dense row's layout): if the order is
    # the cost, pages of 64 rise to pages of 256's rate there.
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-420} ab "${HEAD_DIMS_22:-64;128;256}" \
      "--serving --serving_head_dims=${SERVING_HDS_22:-64,128,256} --no-standard --benchmark_filter=serving/prefill/bf16/" \
      '| head_dim | cache' 'base:' "linear:bench/row_setup.h:$linear_sed"
    ;;
  ab19)
    # Issue 25: the paged rows' gap to seqused_k at pages of 64 and 256, the
    # pages in order (a paged cache then has the dense row's layout) in
    # every variant: "cap" also gives the seqused_k cache room for exactly
    # 16384 keys (the same layout; the bench's 20480 puts its sequences
    # 20480 rows apart), "arith" computes CacheProducer's page from the key
    # instead of loading it from the block table (right only in order).
    local_linear="bench/row_setup.h:$linear_sed"
    local_cap="bench/serving_bench.cpp:$cap_sed"
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-400} ab "${HEAD_DIMS_19:-64;256}" \
      "--serving --serving_head_dims=${SERVING_HDS_19:-64,256} --no-standard --benchmark_filter=serving/prefill/bf16/" \
      '| head_dim | cache' "linear:$local_linear" "cap:$local_linear;;$local_cap" \
      "arith:$local_linear;;$local_cap;;kernels/sm90/producer.cuh:s/return __ldg(p.block_table + static_cast<int64_t>(tile.batch)/return static_cast<int>(static_cast<int64_t>(tile.batch)/"
    ;;
  ncu19)
    # ab19's question by the counters: the bench's pages in order and the
    # seqused_k cache's room at 16384 keys (the seds change the tree), so
    # the three rows read the same layout; then ncu of hd256's seqused_k and 256-key-page rows
    # (bf16 cache), and pages of 64 (also one box a block at hd256), stall
    # samples per SASS line by role.
    sed -i "$linear_sed" bench/row_setup.h
    sed -i "$cap_sed" bench/serving_bench.cpp
    OUT=$out HD=${HD_19:-256} CACHES="seqused paged64 paged256" KVS=bf16 scripts/ncu-serving-prefill.sh
    ;;
  ab12)
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-420} ab "64;256" \
      "--serving --serving_head_dims=64,256 --no-standard --benchmark_filter=serving/prefill/bf16/" '| head_dim | cache' \
      'base:' "linear:bench/row_setup.h:$linear_sed" \
      "prefetch:@$dir/2026-12-05-paged-boxes-prefetch.patch" \
      "ahead4:@$dir/2026-12-05-paged-boxes-prefetch.patch;;kernels/sm90/producer.cuh:s/kPrefetchAhead = 2;/kPrefetchAhead = 4;/"
    ;;
  ab13)
    ab "64" "--serving --serving_head_dims=64 --no-standard --benchmark_filter=serving/prefill/" '| head_dim | cache' \
      'base:' "w3:@$dir/2026-12-05-fp8-cache-hd64-192x96.patch"
    ;;
  ab14)
    # An upper bound, not a candidate: what K's copies cost the rows whose
    # Q K^T reads K as e4m3 (what a TMA-loaded K could save at most).
    ab "128;256" "--serving --serving_head_dims=128,256 --no-standard --benchmark_filter=serving/prefill/bf16-e4m3kv/" \
      '| head_dim | cache' 'base:' "nok:@$dir/2026-12-05-fp8-cache-no-k-copies-timing-only.patch"
    ;;
  ab15)
    ab "64;128" "--head_dims=64,128 --seqlens=2048,16384 --no-standard;;--serving --serving_head_dims=64,128 --no-standard --benchmark_filter=serving/prefill/bf16/" \
      '| dtype;;| head_dim | cache' 'base:' "hint:@$dir/2026-12-05-tma-l2-hints.patch"
    ;;
  ab16)
    # Issue 29's weakest cells (hd64 causal 512 and 1k) on the runner-up
    # tile: candidates 0 and 1 swapped (sm90-tiles.md measured 1000 keys
    # and up only).
    ab "64" "--head_dims=64 --seqlens=512,1024,2048 --no-standard" '| dtype' 'base:' \
      'm128:s/\(CandidateTile<64, kMasked, 0>  { static constexpr int \).*/\1kBlockM = 128, kBlockN = 128, kStages = 3; };/;;s/\(CandidateTile<64, kMasked, 1>  { static constexpr int \).*/\1kBlockM = 192, kBlockN = 128, kStages = 2; };/'
    ;;
  ab12+13)
    # Both in one device call, each in a folder of its own under $OUT.
    OUT=$out/ab12 AB_CALL_TIMEOUT=330 "$0" ab12
    OUT=$out/ab13 AB_CALL_TIMEOUT=220 "$0" ab13
    ;;
  ab21+test)
    # ab21 first (it copies the tree as it is), then the queued patches'
    # whole GPU suite and the paged sanitizer cases on the tree with them
    # applied, in one device call (about 450 s on an H100).
    OUT=$out/ab21 AB_CALL_TIMEOUT=180 "$0" ab21
    suite_with_patches '*PagedKv*chunked_pages16*:*PagedKv*chunked_pages48*:*PagedKv*chunked_tiles_pages128*:*Sanitizer*' 380
    ;;
  ab14+15)
    OUT=$out/ab14 AB_CALL_TIMEOUT=230 "$0" ab14
    OUT=$out/ab15 AB_CALL_TIMEOUT=320 "$0" ab15
    ;;
  ab10)
    AB_CALL_TIMEOUT=${AB_CALL_TIMEOUT:-470} ab_serving 'base:' "$spec" "b2:@$dir/2026-12-05-fp8-cache-sector-pairs-batch2.patch"
    ncu_all_hd256
    ;;
  ab6)
    ROUNDS=${ROUNDS:-3} ab "128;256" "--serving --serving_head_dims=128,256 --no-standard --benchmark_filter=serving/prefill/;;--serving --serving_head_dims=128,256 --no-standard --backend=sm80 --benchmark_filter=serving/prefill/bf16/" \
      '| head_dim | cache;;| head_dim | cache' 'base:' "$spec"
    ;;
  *) sed -n '2,20p' "$0"; exit 2 ;;
esac
