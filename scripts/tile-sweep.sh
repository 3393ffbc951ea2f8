#!/usr/bin/env bash
# Compares variants of the sm90 kernel on a GPU in one go: each variant is
# the source tree with sed expressions applied (default file
# kernels/sm90/kernel_traits.cuh; "path:expr" edits another file of the
# tree; "@file.patch" applies a patch made with git diff at the tree's
# root, "-@file.patch" takes one out (git apply -R); several edits are
# separated by ";;"), built (only the head dims given) into its own
# folder; then every variant's flash_bench runs ROUNDS
# times, interleaved, so clock drift hits all alike.
#
#   HEAD_DIMS="64" BENCH_ARGS="--head_dims=64 --dtypes=bf16 --seqlens=2048,16384" \
#     scripts/tile-sweep.sh 'base:' 'm128:s/kBlockM = 192/kBlockM = 128/' \
#                           'other:kernels/sm90/fwd_kernel.cuh:s/foo/bar/' \
#                           'two:src/dispatch.cpp:s/a/b/;;kernels/sm90/unit_map.h:s/c/d/' \
#                           'qk:@docs/history/patches/2026-12-03-fp8-bf16-qk-from-hd192.patch'
#
# Prints one table per variant and round, every column (COLS: cut's field
# list, default 2-; TABLE: the regex of the table's
# header line, default the standard sweep's "| dtype"; e.g. "| head_dim |
# cache" with --serving); logs go to $OUT as they are written, and at the
# end into $OUT/sweep-logs.tgz (a device call returns 8 files at most). A
# flash_bench run that takes longer than BENCH_TIMEOUT seconds (default 180:
# a variant that hangs) is stopped and reported. scripts/sweep-compare.py
# reads the logs and prints each row's change against the first variant.
#
# Several flash_bench runs per variant and round: separate their argument
# lists in BENCH_ARGS with ";;" and give TABLE one regex each, in the same
# order and separated the same way (one TABLE serves them all). Variants
# that change disjoint kernels can then share one pair of builds:
#   BENCH_ARGS="--decode --l2_flush=read;;--fp8_prefill" \
#   TABLE='| head_dim | L | batch;;| head_dim | causal | fp8' scripts/tile-sweep.sh ...
set -uo pipefail
OUT=${OUT:-$PWD/tile-sweep-out}
mkdir -p "$OUT"
HEAD_DIMS=${HEAD_DIMS:-64;128;256}
ROUNDS=${ROUNDS:-2}
src=$PWD
names=()
for spec in "$@"; do
  name=${spec%%:*}
  edits=${spec#*:}
  dir=/tmp/variant-$name
  rm -rf "$dir" && mkdir -p "$dir"
  tar -C "$src" --exclude=./build --exclude=./.git -cf - . | tar -C "$dir" -xf -
  while [[ -n "$edits" ]]; do
    edit=${edits%%;;*}
    if [[ "$edits" == *";;"* ]]; then edits=${edits#*;;}; else edits=""; fi
    if [[ "$edit" == @* ]]; then
      (cd "$dir" && git apply "$src/${edit#@}") || echo "[$name] WARNING: ${edit#@} did not apply"
      continue
    fi
    if [[ "$edit" == -@* ]]; then
      (cd "$dir" && git apply -R "$src/${edit#-@}") || echo "[$name] WARNING: ${edit#-@} did not come out"
      continue
    fi
    file=kernels/sm90/kernel_traits.cuh
    expr=$edit
    if [[ "$edit" == *:* && -f "$dir/${edit%%:*}" ]]; then
      file=${edit%%:*}
      expr=${edit#*:}
    fi
    [[ -z "$expr" ]] && continue
    cp "$dir/$file" "$dir/$file.orig"
    sed -i "$expr" "$dir/$file"
    if cmp -s "$dir/$file" "$dir/$file.orig"; then echo "[$name] WARNING: '$expr' changed nothing in $file"; fi
    rm -f "$dir/$file.orig"
  done
  grep -n "struct CandidateTile<" "$dir/kernels/sm90/kernel_traits.cuh" | sed "s/^/[$name] /" >>"$OUT/variants.txt"
  (cmake -S "$dir" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
     -DFLASH_HEAD_DIMS="$HEAD_DIMS" -DFLASH_BUILD_TESTS=OFF -DFLASH_BUILD_EXAMPLES=OFF &&
   cmake --build "$dir/build" -j "$(nproc)") >"$OUT/build-$name.log" 2>&1 || { echo "[$name] build FAILED"; tail -20 "$OUT/build-$name.log"; continue; }
  echo "[$name] spill warnings: $(grep -c 'spill' "$OUT/build-$name.log"); wgmma serialised: $(grep -c 'instructions are serialized' "$OUT/build-$name.log")"
  names+=("$name")
done
cat "$OUT/variants.txt"
IFS=$'\n' read -r -d '' -a arg_sets < <(printf '%s' "${BENCH_ARGS:-}" | sed 's/;;/\n/g'; printf '\0')
IFS=$'\n' read -r -d '' -a tables < <(printf '%s' "${TABLE:-| dtype}" | sed 's/;;/\n/g'; printf '\0')
[[ ${#arg_sets[@]} == 0 ]] && arg_sets=("")
for round in $(seq "$ROUNDS"); do
  for name in "${names[@]}"; do
    for k in "${!arg_sets[@]}"; do
      table=${tables[$k]:-${tables[0]}}
      log="$OUT/bench-$name-$round.log"
      [[ ${#arg_sets[@]} -gt 1 ]] && log="$OUT/bench-$name-$round-$k.log"
      # shellcheck disable=SC2086  # the argument list splits on spaces
      timeout "${BENCH_TIMEOUT:-180}" /tmp/variant-$name/build/bench/flash_bench --no-standard ${arg_sets[$k]} \
        >"$log" 2>&1
      [[ $? == 124 ]] && echo "[$name] round $round TIMED OUT after ${BENCH_TIMEOUT:-180}s (a hang?)"
      echo "## $name round $round${arg_sets[1]+ run $k} ($(grep -o 'median: [0-9.]* TFLOP/s' "$log"))"
      sed -n "/^${table}/,/^\$/p" "$log" | sed '1,2d' | cut -d'|' -f"${COLS:-2-}"
    done
  done
done
# A device call returns at most 8 files from $OUT: the logs go back as one
# archive (the tables above are in the call's output already).
(cd "$OUT" && tar czf sweep-logs.tgz --exclude=sweep-logs.tgz ./*.log ./*.txt 2>/dev/null &&
  rm -f ./*.log ./*.txt)
