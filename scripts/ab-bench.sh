#!/usr/bin/env bash
# A/B of source trees on a GPU: builds the trees given as arguments ("a",
# "b", ...) and the current tree (the last letter) with the bench only, then
# runs flash_bench on each ROUNDS times, interleaved (a b a b ...), so clock
# drift hits all alike.
#
#   BENCH_ARGS="--dtypes=bf16 --seqlens=2048,16384" scripts/ab-bench.sh /path/to/old/tree [/another/tree ...]
#
# Prints one table per tree and round, then one table of every cell with
# each tree's rounds and its mean against the last tree's; logs go to $OUT.
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
# The result table's rows of a flash_bench log, without its header.
rows() { sed -n '/^| dtype/,/^$/p' "$1" | sed '1,2d'; }
# SM clock and power while a bench runs (nvidia-smi every 200 ms, where
# there is one): the mean over the samples with the GPU busy. At the power
# cap a change can show up as clock as much as as time: fewer K/V loads run
# at 5-10% higher clocks at the same power (docs/perf/measurement.md).
have_smi=0
command -v nvidia-smi >/dev/null 2>&1 && have_smi=1
clocks() {  # clocks CSV -> "clock N MHz, power M W (k samples)"
  awk -F', *' '$1 > 50 { n++; c += $2; p += $3 }
    END { if (n) printf "clock %.0f MHz, power %.0f W (%d samples)", c / n, p / n, n; else printf "no busy samples" }' "$1"
}
for round in $(seq "$ROUNDS"); do
  for name in "${names[@]}"; do
    smi_csv="$OUT/smi-$name-$round.csv"
    if [ "$have_smi" = 1 ]; then
      nvidia-smi --query-gpu=utilization.gpu,clocks.sm,power.draw --format=csv,noheader,nounits -lms 200 \
        >"$smi_csv" 2>/dev/null &
      smi_pid=$!
    fi
    "${trees[$name]}/build/ab/bench/flash_bench" --no-standard ${BENCH_ARGS:-} >"$OUT/bench-$name-$round.log" 2>&1
    power=""
    if [ "$have_smi" = 1 ]; then
      kill "$smi_pid" 2>/dev/null
      wait "$smi_pid" 2>/dev/null
      power="; $(clocks "$smi_csv")"
    fi
    echo "## $name round $round ($(grep -o 'median: [0-9.]* TFLOP/s' "$OUT/bench-$name-$round.log")$power)"
    rows "$OUT/bench-$name-$round.log" | cut -d'|' -f2-7
  done
done
# One table for all: per cell, each tree's rounds, and each tree's mean
# against the last tree's (the working tree) in per cent.
echo "## all rounds (tree: rounds; mean vs ${names[-1]})"
for name in "${names[@]}"; do
  for round in $(seq "$ROUNDS"); do
    rows "$OUT/bench-$name-$round.log" |
      awk -F'|' -v t="$name" 'NF > 6 { gsub(/ /, "", $2); gsub(/ /, "", $3); gsub(/ /, "", $4); gsub(/ /, "", $5);
        gsub(/ /, "", $6); print t, $2, $3, $4, $5, $6 }'
  done
done | awk -v last="${names[-1]}" -v trees="${names[*]}" '
  { key = $2 " hd" $3 " " ($4 == "yes" ? "causal" : "non-causal") " " $5; if (!(key in seen)) { seen[key] = 1; order[++n] = key }
    v[key, $1] = (v[key, $1] == "" ? $6 : v[key, $1] ", " $6); s[key, $1] += $6; c[key, $1]++ }
  END { nt = split(trees, t, " ")
    head = "| cell"; rule = "|---"
    for (j = 1; j <= nt; j++) { head = head " | " t[j]; rule = rule "|---" }
    print head " |"; print rule "|"
    for (i = 1; i <= n; i++) { k = order[i]; line = "| " k
      for (j = 1; j <= nt; j++) { line = line " | " v[k, t[j]]
        if (t[j] != last && c[k, last] > 0 && c[k, t[j]] > 0)
          line = line sprintf(" (%+.1f%%)", 100 * (s[k, t[j]] / c[k, t[j]]) / (s[k, last] / c[k, last]) - 100) }
      print line " |" } }'
