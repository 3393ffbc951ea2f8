#!/usr/bin/env bash
# Forced split counts of the bf16 decode on a dense cache (heads 32/8,
# batch 1 and 2, 4k and 32k keys, the read flush), two rounds, one after
# the other: prints head_dim, keys, batch, kernel and µs per row for each
# count (docs/perf/decode-splits.md, "Split counts at batch 1"). Uses
# FLASH_BENCH when it is an executable (a tile-sweep build, say), else
# builds flash_bench for HDS (default "64;128;256") in build/splitsweep.
# Run on the device machine from the repository root.
set -uo pipefail
OUT=${OUT:-.}
HDS=${HDS:-"64;128;256"}
BENCH=${FLASH_BENCH:-}
if [[ ! -x "$BENCH" ]]; then
  B=build/splitsweep
  (cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DFLASH_HEAD_DIMS="$HDS" \
    -DFLASH_BUILD_TESTS=OFF -DFLASH_BUILD_EXAMPLES=OFF && cmake --build $B -j "$(nproc)" --target flash_bench) \
    >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
  rm -f "$OUT/build.log"
  BENCH=$B/bench/flash_bench
fi
for r in 1 2; do
  for s in ${SPLITS:-0 8 15 22 30 45 60}; do
    echo "## splits $s round $r"
    timeout 40 "$BENCH" --decode --no-standard --decode_head_dims="${HDS//;/,}" --decode_seqlens=4096,32768 \
      --decode_batches=1,2 --num_splits="$s" --l2_flush=read --benchmark_filter='dense' 2>&1 |
      grep -E "^\| (64|128|256) " | awk -F'|' '{print $2,$3,$4,$5,$6,$8}'
  done
done
