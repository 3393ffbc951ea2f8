#!/usr/bin/env bash
# Decode time against the split count, per head dim, on a GPU: builds
# flash_bench (BUILD_DIR, default build/gpu-check) and runs the decode rows
# of one cache kind (CACHE: dense, paged16 or paged256; default dense) for
# each --num_splits in SPLITS (0 = flash's pick) and each head dim in
# HEAD_DIMS. Prints one table of median µs: rows (head_dim, L, batch),
# columns the split counts, each cell ROUNDS figures (default 1; the rounds
# run one after another over all split counts, so that they interleave).
# BENCH_ARGS go to every flash_bench run (--decode_seqlens, --decode_batches,
# --l2_flush=read, ...). Logs go to $OUT.
#
#   SPLITS="0 1 2 4 8 16 32" HEAD_DIMS="64 128 256" CACHE=paged16 scripts/decode-split-sweep.sh
#   ROUNDS=2 SPLITS="0 1 2 3 4" BENCH_ARGS="--decode_seqlens=256,384,448,512 --decode_batches=1,8 --l2_flush=read" \
#     scripts/decode-split-sweep.sh
set -uo pipefail
OUT=${OUT:-$PWD/decode-split-out}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build/gpu-check}
SPLITS=${SPLITS:-0 1 2 4 8 16 32}
HEAD_DIMS=${HEAD_DIMS:-64 128 256}
CACHE=${CACHE:-dense}
ROUNDS=${ROUNDS:-1}
read -r -a extra <<<"${BENCH_ARGS:-}"
(cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
   -DFLASH_HEAD_DIMS="$(echo $HEAD_DIMS | tr ' ' ';')" -DFLASH_BUILD_TESTS=OFF -DFLASH_BUILD_EXAMPLES=OFF &&
 cmake --build "$BUILD_DIR" -j "$(nproc)" --target flash_bench) >"$OUT/build.log" 2>&1 ||
  { echo "build FAILED"; tail -20 "$OUT/build.log"; exit 1; }
for r in $(seq "$ROUNDS"); do
  for hd in $HEAD_DIMS; do
    for s in $SPLITS; do
      "$BUILD_DIR/bench/flash_bench" --decode --no-standard --decode_head_dims="$hd" --num_splits="$s" \
        --benchmark_filter="decode/.*/$CACHE/" ${extra[@]+"${extra[@]}"} >"$OUT/hd$hd-s$s-r$r.log" 2>&1
    done
  done
done
# One table: | head_dim | L | batch | µs per split count | ($CACHE cache)
echo "$CACHE cache, median µs"
printf '| head_dim | L | batch |'; for s in $SPLITS; do printf ' %s |' "$([ "$s" = 0 ] && echo auto || echo "$s")"; done; echo
printf '|---|---|---|'; for s in $SPLITS; do printf -- '---|'; done; echo
for hd in $HEAD_DIMS; do
  first=$(echo $SPLITS | cut -d' ' -f1)
  for key in $(grep -E "^\| [0-9]+ \| [0-9]+ \| [0-9]+ \| $CACHE " "$OUT/hd$hd-s$first-r1.log" | awk -F'|' '{gsub(/ /,""); print $3"x"$4}'); do
    L=${key%x*}; B=${key#*x}
    printf '| %s | %s | %s |' "$hd" "$L" "$B"
    for s in $SPLITS; do
      figs=()
      for r in $(seq "$ROUNDS"); do
        us=$(grep -E "^\| $hd \| $L \| $B \| $CACHE " "$OUT/hd$hd-s$s-r$r.log" | awk -F'|' '{gsub(/ /,"",$8); print $8}' | head -1)
        figs+=("${us:--}")
      done
      picked=""
      [ "$s" = 0 ] && picked=$(grep -E "^\| $hd \| $L \| $B \| $CACHE " "$OUT/hd$hd-s0-r1.log" | grep -o '[0-9]* splits\?' | head -1)
      cell=$(IFS=,; echo "${figs[*]}" | sed 's/,/, /g')
      printf ' %s |' "$cell$([ "$s" = 0 ] && echo " (${picked:-?})")"
    done
    echo
  done
done
