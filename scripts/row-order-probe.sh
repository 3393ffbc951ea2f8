#!/usr/bin/env bash
# Whether a serving prefill row's time depends on where it runs in the
# bench's order (clocks, power, allocation history) rather than on its
# cache: the bench's pages in order and the seqused_k cache's room at
# exactly 16384 keys (seds on the tree: every row then reads the same
# bytes at the same offsets), one build of HD (default 256), then each
# row alone in a process of its own in the order ROWS, then all rows in
# one process, three repetitions randomly interleaved; then, with
# docs/history/patches/2026-12-05-serving-shared-kv.patch (every row of a
# head dim reads one Q, O, K and V allocation), all rows in the bench's
# order, twice, and once more with 2 s of warm-up launches a row.
# nvidia-smi samples clocks, power and temperature throughout. Logs
# in $OUT/row-order-logs.tgz.
#
#   OUT=out HD=256 ROWS="paged64 seqused paged256 dense paged64 seqused" scripts/row-order-probe.sh
#   (INTERLEAVE=0 skips the interleaved process)
set -uo pipefail
OUT=${OUT:-$PWD/row-order-out}
HD=${HD:-256}
ROWS=${ROWS:-paged64 seqused paged256 dense paged64 seqused paged256 dense}
BUILD_DIR=${BUILD_DIR:-build/row-order}
mkdir -p "$OUT"
smi=""
# The seds and the patch change the tree: put it back however the script ends.
restore() {
  [[ -n $smi ]] && kill "$smi" 2>/dev/null
  git checkout -q bench/row_setup.h bench/serving_bench.cpp
  # The device tool returns at most 8 files from $OUT: the logs travel as one archive.
  (cd "$OUT" && tar czf row-order-logs.tgz --remove-files -- *.log *.txt *.csv 2>/dev/null)
}
trap restore EXIT
# shellcheck source=scripts/serving-seds.sh
source "$(dirname "$0")/serving-seds.sh"
sed -i "$linear_sed" bench/row_setup.h
sed -i "$cap_sed" bench/serving_bench.cpp
git diff --stat >"$OUT/seds.txt"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DFLASH_HEAD_DIMS="$HD" >"$OUT/configure.log" 2>&1 || { echo "configure FAILED"; exit 1; }
cmake --build "$BUILD_DIR" -j "$(nproc)" --target flash_bench >"$OUT/build.log" 2>&1 || { echo "build FAILED"; tail -30 "$OUT/build.log"; exit 1; }
bench="$BUILD_DIR/bench/flash_bench"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv -lms 250 >"$OUT/smi.csv" 2>&1 &
smi=$!
echo "## each row alone (ms)"
n=0
for row in $ROWS; do
  log="$OUT/alone-$((++n))-$row.log"
  "$bench" --serving --serving_head_dims="$HD" --no-standard \
    --benchmark_filter="serving/prefill/bf16/hd$HD/.*/$row/" >"$log" 2>&1
  echo "$row $(grep -h -o 'median_ms=[0-9.]*' "$log")"
done
if [[ ${INTERLEAVE:-1} != 0 ]]; then
  echo "## all rows, 3 repetitions interleaved at random (ms)"
  "$bench" --serving --serving_head_dims="$HD" --no-standard --benchmark_filter="serving/prefill/bf16/" \
    --benchmark_repetitions=3 --benchmark_enable_random_interleaving=true >"$OUT/interleaved.log" 2>&1
  grep -E "manual_time +[0-9]" "$OUT/interleaved.log" | sed -E 's/.*K16384\/([a-z0-9]+)\/.*median_ms=([0-9.]+).*/\1 \2/'
fi
git apply docs/history/patches/2026-12-05-serving-shared-kv.patch || { echo "shared-kv patch does not apply"; exit 1; }
cmake --build "$BUILD_DIR" -j "$(nproc)" --target flash_bench >"$OUT/build-shared.log" 2>&1 || { echo "build FAILED"; tail -30 "$OUT/build-shared.log"; exit 1; }
for r in 1 2 warm; do
  echo "## one Q/O/K/V allocation for all rows, round $r (ms)"
  extra=()
  [[ $r == warm ]] && extra=(--warmup_ms=2000)
  "$bench" --serving --serving_head_dims="$HD" --no-standard --benchmark_filter="serving/prefill/bf16/" "${extra[@]}" \
    >"$OUT/shared-$r.log" 2>&1
  grep -E "manual_time +[0-9]" "$OUT/shared-$r.log" | sed -E 's/.*K16384\/([a-z0-9]+)\/.*median_ms=([0-9.]+).*/\1 \2/'
done
