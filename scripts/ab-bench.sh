#!/usr/bin/env bash
# A/B of source trees on a GPU: builds the trees given as arguments ("a",
# "b", ...) and the current tree (the last letter) with the bench only, then
# runs flash_bench on each ROUNDS times, interleaved (a b a b ...), so clock
# drift hits all alike.
#
#   BENCH_ARGS="--dtypes=bf16 --seqlens=2048,16384" scripts/ab-bench.sh /path/to/old/tree [/another/tree ...]
#
# Prints one table per tree and round; logs go to $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/ab-bench-out}
mkdir -p "$OUT"
HEAD_DIMS=${HEAD_DIMS:-64;128;256}
ROUNDS=${ROUNDS:-2}
declare -A trees=()
names=()
letters=(a b c d e f)
i=0
for dir in "$@" "$PWD"; do
  trees[${letters[$i]}]=$dir
  names+=("${letters[$i]}")
  i=$((i + 1))
done
for name in "${names[@]}"; do
  dir=${trees[$name]}
  (cmake -S "$dir" -B "$dir/build/ab" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
     -DFLASH_HEAD_DIMS="$HEAD_DIMS" -DFLASH_BUILD_TESTS=OFF -DFLASH_BUILD_EXAMPLES=OFF &&
   cmake --build "$dir/build/ab" -j "$(nproc)" --target flash_bench) >"$OUT/build-$name.log" 2>&1 ||
    { echo "[$name] build FAILED"; tail -20 "$OUT/build-$name.log"; exit 1; }
done
for round in $(seq "$ROUNDS"); do
  for name in "${names[@]}"; do
    "${trees[$name]}/build/ab/bench/flash_bench" --no-standard ${BENCH_ARGS:-} >"$OUT/bench-$name-$round.log" 2>&1
    echo "## $name round $round ($(grep -o 'median: [0-9.]* TFLOP/s' "$OUT/bench-$name-$round.log"))"
    sed -n '/^| dtype/,/^$/p' "$OUT/bench-$name-$round.log" | sed '1,2d' | cut -d'|' -f2-7
  done
done
