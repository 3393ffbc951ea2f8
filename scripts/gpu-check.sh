#!/usr/bin/env bash
# Build, test and benchmark flash on a GPU machine in one go.
#
#   scripts/gpu-check.sh [phases...]     phases: build sass test ctest sanitize stress python ncu bench quickbench decode serving
#                                        features headdims fp8 fp8prefill mla
#                                        (default: build sass test sanitize bench)
#
# test: flash_host_tests, flash_gpu_tests (TEST_FILTER) and flash_mla_tests,
# then the examples (ctest's example.* entries; each checks its own output;
# their output in $OUT/examples.log).
#
# stress: flash_stress_tests (tests/test_stress_gpu.cpp: millions of keys,
# 2^32-element caches, batch * heads past 65535, against a float64 GPU
# reference; a few minutes, ~40 GB of device memory), one line per path.
#
# python: the Python package's pytest suite (python/tests) on the package
# the build assembled under $BUILD_DIR/python (FLASH_BUILD_PYTHON, on when
# nanobind is installed), with PyTorch's and CuPy's GPU tests.
#
# decode: flash_bench --decode --varlen --window (split-KV decode on dense and
# paged KV caches against a measured read-bandwidth ceiling, varlen prefill
# against a dense batch, sliding-window prefill on flash's pick and on the
# sm80 kernel), JSON in $OUT/bench_decode.json.
#
# serving: flash_bench --serving --no-standard (chunked prefill on dense,
# seqused_k and paged caches against the dense call; decode on dense and
# paged caches against a measured read ceiling), JSON in
# $OUT/bench_serving.json, both tables in the summary.
#
# features: flash_bench --features --no-standard (each score/softmax
# feature, sinks and ALiBi, against the same call without it; features_bench.h),
# JSON in $OUT/bench_features.json, its table in the summary.
#
# fp8: flash_bench --fp8 --decode_head_dims=64,128,256 --no-standard (decode on
# an e4m3 KV cache beside bf16, dense and paged16, against the read
# ceiling), JSON in $OUT/bench_fp8.json. FP8_ARGS: extra flags.
#
# fp8prefill: flash_bench --fp8_prefill --no-standard (e4m3 Q, K, V beside
# bf16 at N 16384, and a cublasLt fp8 GEMM ceiling; fp8_prefill_bench.h),
# JSON in $OUT/bench_fp8_prefill.json, its table and ceilings in the summary.
#
# mla: flash_bench --mla --no-standard (MLA's absorbed decode through
# attention_forward, bench/mla_rows.h), JSON in $OUT/bench_mla.json, and
# mla_bench's split-D kernel on the issue's shape, in the summary.
#
# headdims: flash_bench --head_dim_rows --no-standard (head dims 64 to 256,
# between and at the compiled ones, against hd128 and the compiled head dim
# that ran each; head_dims_bench.h), JSON in $OUT/bench_head_dims.json.
#
# Full logs go to $OUT (or ./gpu-check-out when OUT is unset), archived in
# logs.tgz; files already in $OUT are left as they are. The last thing
# printed is a short summary table. Environment: BUILD_DIR (default
# build/gpu-check), CUDA_ARCHS (default 90a), HEAD_DIMS (default all),
# BENCH_ARGS (extra flash_bench flags), SERVING_ARGS (extra flags of the
# serving phase, e.g. --serving_head_dims=128), BENCH_BACKENDS (default auto; e.g.
# "auto sm80"), DECODE_ARGS (extra flags of the decode phase, e.g.
# "--backend=sm80"), TEST_FILTER (gtest filter), TEST_TIMEOUT (seconds the
# GPU test binaries get, default 400: a kernel that hangs costs that, not
# the whole device call; the summary names the test it hung in),
# SANITIZE_FILTER and SANITIZE_TIMEOUT (see scripts/sanitize.sh).
set -uo pipefail

OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build/gpu-check}
CUDA_ARCHS=${CUDA_ARCHS:-90a}
HEAD_DIMS=${HEAD_DIMS:-32;64;96;128;192;256}
TEST_FILTER=${TEST_FILTER:-*}
PHASES=${*:-build sass test sanitize bench}
SUMMARY="$OUT/summary.txt"
# Files already in $OUT belong to the caller: the archive at the end leaves them loose.
before=$(mktemp)
find "$OUT" -maxdepth 1 -type f -printf '%P\n' | sort >"$before"
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
has_phase() { [[ " $PHASES " == *" $1 "* ]]; }

note "== $(date -u +%Y-%m-%dT%H:%MZ) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null | head -1)"

if has_phase build; then
  t0=$(date +%s)
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS" \
    -DFLASH_HEAD_DIMS="$HEAD_DIMS" -DPython_EXECUTABLE="$(command -v python3)" >"$OUT/configure.log" 2>&1 || { note "configure FAILED"; tail -30 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD_DIR" -j "$(nproc)" >"$OUT/build.log" 2>&1 || { note "build FAILED"; grep -E "error|Error" -A3 "$OUT/build.log" | head -60; exit 1; }
  note "build: ok in $(( $(date +%s) - t0 ))s; spill warnings: $(grep -c 'spill' "$OUT/build.log"); wgmma serialised (ptxas C751x/C7520): $(grep -c 'wgmma.mma_async instructions are serialized' "$OUT/build.log")"
fi

if has_phase sass; then
  lib="$BUILD_DIR/libflash.a"
  cuobjdump --dump-sass "$lib" >"$OUT/sass.txt" 2>&1
  # Per kernel: tensor-core MMAs, ldmatrix, local-memory traffic.
  awk '/Function :/ {name=$3; seen[name]=1} / HMMA/ {h[name]++} /[HQ]GMMA/ {g[name]++} /LDSM/ {l[name]++}
       /LDL|STL/ {s[name]++}
       END {for (n in seen) printf "%s HMMA=%d HGMMA=%d LDSM=%d LDL/STL=%d\n", n, h[n], g[n], l[n], s[n]}' \
    "$OUT/sass.txt" | sort >"$OUT/sass_summary.txt"
  note "sass: $(wc -l <"$OUT/sass_summary.txt") kernels; with LDL/STL: $(grep -vc 'LDL/STL=0$' "$OUT/sass_summary.txt")"
fi

if has_phase test; then
  "$BUILD_DIR/tests/flash_host_tests" >"$OUT/host_tests.log" 2>&1
  note "host tests: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$OUT/host_tests.log" | tr '\n' ' ')"
  t0=$(date +%s)
  timeout "${TEST_TIMEOUT:-400}" "$BUILD_DIR/tests/flash_gpu_tests" --gtest_filter="$TEST_FILTER" >"$OUT/gpu_tests.log" 2>&1
  [[ $? == 124 ]] && note "gpu tests TIMED OUT after ${TEST_TIMEOUT:-400}s in: $(grep '^\[ RUN' "$OUT/gpu_tests.log" | tail -1)"
  note "gpu tests ($(( $(date +%s) - t0 ))s): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$OUT/gpu_tests.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$OUT/gpu_tests.log" | head -20 | tee -a "$SUMMARY"
  if [[ -x "$BUILD_DIR/tests/flash_mla_tests" ]]; then
    t0=$(date +%s)
    timeout "${TEST_TIMEOUT:-400}" "$BUILD_DIR/tests/flash_mla_tests" >"$OUT/mla_tests.log" 2>&1
    [[ $? == 124 ]] && note "mla tests TIMED OUT in: $(grep '^\[ RUN' "$OUT/mla_tests.log" | tail -1)"
    note "mla tests ($(( $(date +%s) - t0 ))s): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$OUT/mla_tests.log" | tr '\n' ' ')"
    grep -E '^\[  FAILED  \]' "$OUT/mla_tests.log" | head -20 | tee -a "$SUMMARY"
  fi
  # The examples check their own results; ctest's example.* entries run
  # each as examples/CMakeLists.txt registers it (77, no GPU, is a skip).
  ctest --test-dir "$BUILD_DIR" -R '^example\.' --timeout 120 --output-on-failure >"$OUT/examples.log" 2>&1
  note "examples: $(grep -E 'tests passed|tests failed' "$OUT/examples.log")"
  grep -E '\((Failed|Skipped|Not Run|Timeout)\)' "$OUT/examples.log" | tee -a "$SUMMARY"
fi

if has_phase ctest; then
  # Everything ctest knows: host, GPU, package (install + consumer builds, run) and example tests.
  t0=$(date +%s)
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j 4 >"$OUT/ctest.log" 2>&1
  note "ctest ($(( $(date +%s) - t0 ))s): $(grep -E 'tests passed|tests failed' "$OUT/ctest.log")"
  grep -E '\((Failed|Skipped|Not Run)\)' "$OUT/ctest.log" | head -20 | tee -a "$SUMMARY"
fi

if has_phase sanitize; then
  # memcheck, racecheck, initcheck and synccheck over *Sanitizer* and the
  # graph/thread tests, flash's kernels only (scripts/sanitize.sh says why),
  # then the MLA tests and the examples.
  # Its logs land loose in $OUT, so the archive below takes them.
  OUT="$OUT" BUILD_DIR="$BUILD_DIR" "$(dirname "$0")/sanitize.sh" >"$OUT/sanitize.log" 2>&1
  note "sanitize: exit $?"
  while IFS= read -r line; do note "  $line"; done <"$OUT/sanitize-summary.txt"
fi

if has_phase stress; then
  t0=$(date +%s)
  "$BUILD_DIR/tests/flash_stress_tests" >"$OUT/stress.log" 2>&1
  note "stress ($(( $(date +%s) - t0 ))s): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$OUT/stress.log" | tr '\n' ' ')"
  grep -E '^stress ' "$OUT/stress.log" | tee -a "$SUMMARY" >/dev/null
  grep -E '^\[  FAILED  \]' "$OUT/stress.log" | head -20 | tee -a "$SUMMARY"
fi

if has_phase python; then
  if [[ -d "$BUILD_DIR/python/flash" ]]; then
    PYTHONPATH="$BUILD_DIR/python" python3 -m pytest -q -p no:cacheprovider -rs python/tests >"$OUT/pytest.log" 2>&1
    note "pytest: exit $?; $(tail -1 "$OUT/pytest.log")"
    grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20 | tee -a "$SUMMARY"
  else
    note "pytest: no Python package in $BUILD_DIR (FLASH_BUILD_PYTHON off: nanobind missing?)"
  fi
fi

if has_phase ncu; then
  # Hardware counters of one sm90 launch per head dim (bf16, N = 2048, non-causal).
  for hd in ${NCU_HEAD_DIMS:-64 128}; do
    ncu --clock-control none -k fwd_kernel --launch-skip 3 --launch-count 1 --section SpeedOfLight \
      --section WarpStateStats --section ComputeWorkloadAnalysis --section SchedulerStats --section Occupancy \
      "$BUILD_DIR/bench/flash_bench" --dtypes=bf16 --head_dims="$hd" --seqlens="${NCU_SEQLEN:-2048}" --no-standard \
      --flash_iters=2 --gemm_iters=1 --benchmark_filter="flash/bf16/hd$hd/noncausal" >"$OUT/ncu_hd$hd.txt" 2>&1
    note "ncu hd$hd: $(grep -cE 'Section:' "$OUT/ncu_hd$hd.txt") sections"
  done
fi

if has_phase bench || has_phase quickbench; then
  args=()
  has_phase quickbench && args+=(--dtypes=bf16 --seqlens=2048,16384 --no-standard --flash_iters=20)
  # Entries are backend[:extra,flags], e.g. "auto sm80:--no-standard".
  for entry in ${BENCH_BACKENDS:-auto}; do
    backend=${entry%%:*}
    extra=()
    [[ "$entry" == *:* ]] && IFS=',' read -r -a extra <<<"${entry#*:}"
    "$BUILD_DIR/bench/flash_bench" --backend="$backend" "${args[@]}" "${extra[@]}" ${BENCH_ARGS:-} \
      --benchmark_out="$OUT/bench_$backend.json" --benchmark_out_format=json >"$OUT/bench_$backend.log" 2>&1
    note "bench --backend=$backend: exit $?"
    sed -n '/^| dtype/,$p' "$OUT/bench_$backend.log" >>"$SUMMARY"
    grep -iE "ceiling|gpu" "$OUT/bench_$backend.log" | tail -3 >>"$SUMMARY"
  done
fi

if has_phase decode; then
  t0=$(date +%s)
  "$BUILD_DIR/bench/flash_bench" --decode --varlen --window ${DECODE_ARGS:-} \
    --benchmark_out="$OUT/bench_decode.json" --benchmark_out_format=json >"$OUT/bench_decode.log" 2>&1
  note "decode bench: exit $? in $(( $(date +%s) - t0 ))s"
  grep -E "^read ceiling" "$OUT/bench_decode.log" >>"$SUMMARY"
  sed -n '/^## decode/,$p' "$OUT/bench_decode.log" >>"$SUMMARY"
  grep -E "ERROR OCCURRED" "$OUT/bench_decode.log" | head -10 | tee -a "$SUMMARY"
fi

# flash_bench's rows of one kind (no standard-attention rows): JSON and log
# as $OUT/bench_<name>.*, its tables and read ceiling in the summary.
bench_rows() {
  local name=$1 label=$2
  shift 2
  local t0
  t0=$(date +%s)
  "$BUILD_DIR/bench/flash_bench" "$@" --no-standard \
    --benchmark_out="$OUT/bench_$name.json" --benchmark_out_format=json >"$OUT/bench_$name.log" 2>&1
  note "$label bench: exit $? in $(( $(date +%s) - t0 ))s"
  grep -E "^- read ceiling|^- batch 1|^\| " "$OUT/bench_$name.log" >>"$SUMMARY"
  grep -E "ERROR OCCURRED" "$OUT/bench_$name.log" | head -10 | tee -a "$SUMMARY"
}

# SERVING_ARGS is split into words on purpose (several flags).
# shellcheck disable=SC2086
has_phase serving && bench_rows serving serving --serving ${SERVING_ARGS:-}
has_phase features && bench_rows features features --features
has_phase headdims && bench_rows head_dims head-dim --head_dim_rows
# shellcheck disable=SC2086
has_phase fp8 && bench_rows fp8 fp8 --fp8 --decode_head_dims=64,128,256 ${FP8_ARGS:-}
has_phase fp8prefill && bench_rows fp8_prefill fp8-prefill --fp8_prefill
if has_phase mla; then
  bench_rows mla mla --mla
  if [[ -x "$BUILD_DIR/bench/mla_bench" ]]; then
    note "mla_bench splitd: $("$BUILD_DIR/bench/mla_bench" 64 8192 128 1 splitd 2>&1 | tail -1)"
  fi
fi

# The failing tests' own output, loose, so that it comes back even when the
# archive below is too large to (the device tool takes files up to 16 MiB).
{
  for log in host_tests.log gpu_tests.log stress.log; do
    [ -f "$OUT/$log" ] && grep -q '^\[  FAILED  \]' "$OUT/$log" &&
      { echo "== $log"; grep -B2 -A14 -E '(Failure|^\[  FAILED  \])' "$OUT/$log" | head -1500; }
  done
  [ -f "$OUT/ctest.log" ] && grep -q 'tests failed out of' "$OUT/ctest.log" &&
    ! grep -q ' 0 tests failed out of' "$OUT/ctest.log" &&
    { echo "== ctest.log"; grep -B2 -A30 -E '\*\*\*Failed|Failure' "$OUT/ctest.log" | head -1500; }
} >"$OUT/failures.txt" 2>/dev/null
[ -s "$OUT/failures.txt" ] || rm -f "$OUT/failures.txt"

# The whole library's SASS (the sass phase) is large: the archives of runs
# with it (153, 156) were over the limit. Its per-kernel summary
# (sass_summary.txt) travels instead.
rm -f "$OUT/sass.txt"

# The device tool returns at most 8 files: keep the summary, the failures,
# the bench JSON and the caller's own files loose, everything else this
# script wrote in one archive.
bundle=$(mktemp -d)/logs.tgz
ours=$(mktemp)
(cd "$OUT" && find . -maxdepth 1 -type f ! -name '*.json' ! -name summary.txt ! -name failures.txt ! -name 'ncu_*' \
  -printf '%P\n' | sort | comm -23 - "$before") >"$ours"
(cd "$OUT" && tar czf "$bundle" -T "$ours") &&
  (cd "$OUT" && xargs -d '\n' -r rm -f <"$ours") && mv "$bundle" "$OUT/logs.tgz"
rm -f "$before" "$ours"

echo
cat "$SUMMARY"
