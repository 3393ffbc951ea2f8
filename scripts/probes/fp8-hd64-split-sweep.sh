#!/usr/bin/env bash
# Forced split counts of the e4m3-cache decode at head dim 64 (heads 32/8,
# 32k keys, batch 1, 8 and 32, dense and 16-key pages), two rounds, one
# after the other: builds flash_bench for head dim 64 in build/fp8sweep and
# prints batch, cache, kv, kernel and µs per row (docs/perf/fp8-decode.md,
# "Split counts on a paged head-dim-64 cache"). Run on the device machine
# from the repository root; OUT receives nothing but the build log on a
# failed build.
set -uo pipefail
OUT=${OUT:-.}
B=build/fp8sweep
(cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DFLASH_HEAD_DIMS=64 \
  -DFLASH_BUILD_TESTS=OFF -DFLASH_BUILD_EXAMPLES=OFF && cmake --build $B -j "$(nproc)" --target flash_bench) \
  >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
rm -f "$OUT/build.log"
for r in 1 2; do
  for s in 0 1 2 4 8 16; do
    echo "## splits $s round $r"
    timeout 40 $B/bench/flash_bench --fp8 --no-standard --decode_head_dims=64 --decode_seqlens=32768 \
      --decode_batches=1,8,32 --num_splits=$s --benchmark_filter='e4m3kv' 2>&1 |
      grep -E "^\| 64 " | awk -F'|' '{print $4,$5,$6,$7,$8}'
  done
done
