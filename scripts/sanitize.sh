#!/usr/bin/env bash
# Runs a representative subset of the GPU tests under compute-sanitizer's
# four tools, one after the other:
#   memcheck   out-of-bounds and misaligned global/shared/local accesses
#   racecheck  shared-memory hazards between the threads of a CTA
#   initcheck  reads of global memory that nothing wrote
#   synccheck  invalid use of barriers (divergent bar.sync, mbarrier misuse)
#
#   scripts/sanitize.sh [tools...]     default: memcheck racecheck initcheck synccheck
#
# Environment: BUILD_DIR (default build/gpu-check, the build of
# scripts/gpu-check.sh), OUT (default ./sanitize-out), SANITIZE_FILTER (gtest
# filter, default *Sanitizer*:GraphsThreads.*: the small ragged/GQA cases,
# many tiles per persistent CTA, CUDA graph replays and concurrent host
# threads), SANITIZE_TIMEOUT (seconds per sanitizer run, default 150), SANITIZE_EXAMPLES
# (0 leaves the examples out), COMPUTE_SANITIZER
# (the binary, default compute-sanitizer on PATH or in /usr/local/cuda/bin).
#
# Only flash's kernels are checked: names containing fwd_kernel (the sm80
# and sm90 kernels, the FP8 prefill's among them), decode_kernel,
# combine_kernel (split-KV), append_kernel (k_new) and
# fp8_transpose_v_kernel (the FP8 prefill's V^T). The tests' references run cuBLAS, whose own sm90 GEMM
# kernels racecheck cannot follow ("failed to handle a hardware exception",
# nvjet_sm90_tss_*, 2026-11-29) and whose internals initcheck may flag.
#   memcheck, racecheck, synccheck: --kernel-name regex=<those names>. Even so,
#     racecheck dies inside cuBLAS, so it runs only the Sanitizer suite
#     (SANITIZE_RACECHECK_FILTER, default *Sanitizer*), which uses no cuBLAS.
#   initcheck: flash's kernels and fill_uniform_kernel, the test kernel that
#     writes Q, K and V. initcheck does not track writes made by kernels its
#     filter leaves out, so with fwd_kernel alone every read of Q/K/V would be
#     reported as uninitialised. --check-api-memory-access no for the same
#     reason: the tests copy the cuBLAS reference's output (written by
#     unchecked kernels) to the host. With that check on, the examples'
#     copies of a dense call's O are reported uninitialised in full
#     (basic_attention every 32-byte sector of it, attention_c its whole
#     buffer) while memcheck is clean and their checked rows pass (H100,
#     2026-12-07). initcheck does not count TMA stores as writes:
#     scripts/probes/initcheck-o-stores.sh writes the same O four ways, and
#     with the host-API check on only the Hopper kernel's dense call (TMA
#     stores) is reported, all 128,000 sectors of its 4,096,000 bytes; the
#     decode and sm80 kernels and the Hopper varlen call (st.global) report
#     0, and O is finite in all four (H100, 2026-12-07).
# Unchecked, then: cuBLAS and the reference's own kernels.
#
# Then the MLA kernels' tests (flash_mla_tests, when built; their quick
# case list) under memcheck, racecheck and synccheck, filtered to
# mla_kernel and combine_kernel (SANITIZE_MLA_KERNELS: another regex of
# kernel names, e.g. with SANITIZE_MLA_FILTER='Decode/SplitMerge.*' the
# decode kernel's own merge: '.*(decode_kernel|combine_kernel|zero_counters_kernel).*').
#
# Then the MLA tests (all tools but initcheck) and the examples (memcheck,
# initcheck and synccheck), below.
#
# Logs go to $OUT/sanitize-<tool>.log (sanitize-mla-<tool>.log,
# sanitize-ex-<example>-<tool>.log). The last lines printed (also in
# $OUT/sanitize-summary.txt) are one per sanitizer run: its exit code, its
# summary line and the gtest result (for an example, a note that its exit
# code carries its own check). The exit code is 0 only if every tool ran to
# its summary and found nothing.
set -uo pipefail

OUT=${OUT:-$PWD/sanitize-out}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build/gpu-check}
FILTER=${SANITIZE_FILTER:-*Sanitizer*:GraphsThreads.*}
TIMEOUT=${SANITIZE_TIMEOUT:-150}
TOOLS=${*:-memcheck racecheck initcheck synccheck}
BIN="$BUILD_DIR/tests/flash_gpu_tests"
SUMMARY="$OUT/sanitize-summary.txt"
: >"$SUMMARY"

SANITIZER=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
if [[ ! -x "$SANITIZER" ]]; then
  echo "sanitize: compute-sanitizer not found (set COMPUTE_SANITIZER)" | tee -a "$SUMMARY"
  exit 1
fi
if [[ ! -x "$BIN" ]]; then
  echo "sanitize: $BIN not found; build first (scripts/gpu-check.sh build, or set BUILD_DIR)" | tee -a "$SUMMARY"
  exit 1
fi
# A filter that matches no kernel checks nothing and reports 0 errors: make
# sure the kernels the filters name are still in the binary.
symbols=$(nm -C "$BIN" 2>/dev/null)
if ! grep -q 'fwd_kernel' <<<"$symbols" || ! grep -q 'fill_uniform_kernel' <<<"$symbols"; then
  echo "sanitize: no fwd_kernel or fill_uniform_kernel in $BIN; update the kernel filters in $0" | tee -a "$SUMMARY"
  exit 1
fi

status=0
# run_cmd NAME TOOL LOG [sanitizer args...] -- COMMAND...: one sanitizer run
# (environment of the caller's, e.g. FLASH_MLA_QUICK=1 run_tool ...), its
# summary line appended to $SUMMARY under NAME, with RESULT_NOTE (when set)
# where no gtest result is found; status=1 unless it ran to its summary and
# found nothing.
run_cmd() {
  local name=$1 tool=$2 log=$3
  shift 3
  local san_args=()
  while (($#)) && [[ "$1" != -- ]]; do
    san_args+=("$1")
    shift
  done
  shift
  echo "== $name: $SANITIZER --tool $tool ${san_args[*]} $*"
  local t0 rc seconds line tests
  t0=$(date +%s)
  timeout --kill-after=10 "$TIMEOUT" "$SANITIZER" --tool "$tool" "${san_args[@]}" --error-exitcode 1 "$@" >"$log" 2>&1
  rc=$?
  seconds=$(( $(date +%s) - t0 ))
  line=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1 | sed -E 's/^=+ *//')
  tests=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$log" | sed -E 's/, listed below://' |
    tr -s ' ' | paste -sd ' ')
  if (( rc == 124 || rc == 137 )); then
    line="timed out after ${TIMEOUT}s (SANITIZE_TIMEOUT)"
  elif [[ -z "$line" ]]; then
    line="no summary line (the tool did not finish; see $log)"
    (( rc == 0 )) && rc=1
  fi
  (( rc != 0 )) && status=1
  printf '%-13s exit %d (%ds); %s; %s\n' "$name:" "$rc" "$seconds" "$line" "${tests:-${RESULT_NOTE:-no gtest result}}" >>"$SUMMARY"
}
# run_tool NAME TOOL LOG BIN FILTER [sanitizer args...]: run_cmd on a gtest
# binary with a filter.
run_tool() {
  local name=$1 tool=$2 log=$3 bin=$4 filter=$5
  shift 5
  run_cmd "$name" "$tool" "$log" "$@" -- "$bin" --gtest_filter="$filter"
}

FLASH_KERNELS='fwd_kernel|decode_kernel|combine_kernel|append_kernel|fp8_transpose_v_kernel'
for tool in $TOOLS; do
  case "$tool" in
    memcheck | synccheck) args=(--kernel-name "regex=.*($FLASH_KERNELS).*") ;;
    # Even filtered to flash's kernels, racecheck dies in cuBLAS's sm90 GEMMs
    # ("failed to handle a hardware exception", seen 2026-11-29), which the
    # graph/thread tests' reference runs; so it runs only the Sanitizer
    # suite, which keeps cuBLAS out (its many-tiles case checks the sm90
    # kernel against the sm80 one).
    racecheck) args=(--kernel-name "regex=.*($FLASH_KERNELS).*") ;;
    initcheck) args=(--kernel-name "regex=.*($FLASH_KERNELS|fill_uniform_kernel).*" --check-api-memory-access no) ;;
    *) echo "sanitize: unknown tool '$tool' (memcheck racecheck initcheck synccheck)"; exit 2 ;;
  esac
  filter=$FILTER
  [[ "$tool" == racecheck ]] && filter=${SANITIZE_RACECHECK_FILTER:-*Sanitizer*}
  run_tool "$tool" "$tool" "$OUT/sanitize-$tool.log" "$BIN" "$filter" "${args[@]}"
done

# The MLA kernels (flash_mla_tests: a float64 host reference, no cuBLAS),
# memcheck, racecheck and synccheck alike, on the tests' quick case list
# (FLASH_MLA_QUICK: bf16, no 128-head cases); SANITIZE_MLA_FILTER picks the tests.
MLA_BIN="$BUILD_DIR/tests/flash_mla_tests"
MLA_FILTER=${SANITIZE_MLA_FILTER:-MlaDecode.HopperMatchesAFloat64Reference:MlaDecode.SplitDMatchesAFloat64Reference:MlaDecode.NinetyNineKibDevicesRunTheSplitDVariant}
if [[ -x "$MLA_BIN" ]]; then
  for tool in $TOOLS; do
    [[ "$tool" == initcheck ]] && continue
    FLASH_MLA_QUICK=1 run_tool "mla-$tool" "$tool" "$OUT/sanitize-mla-$tool.log" "$MLA_BIN" "$MLA_FILTER" \
      --kernel-name "regex=${SANITIZE_MLA_KERNELS:-.*(mla_kernel|combine_kernel).*}"
  done
fi

# The examples users copy (examples/), each checking its own output, under
# memcheck, initcheck and synccheck with no kernel filter (they launch only
# flash's kernels and copy their inputs from the host). racecheck stays with
# the small cases above: the examples' shapes are larger. initcheck checks
# host-API copies too, but not for basic_attention and attention_c, whose
# dense O it reports otherwise (above). cp_ring is left out (NCCL under
# initcheck outlasted 120 s); SANITIZE_EXAMPLES=0 skips them all.
EX_DIR="$BUILD_DIR/examples"
if [[ "${SANITIZE_EXAMPLES:-1}" != 0 && -d "$EX_DIR" ]]; then
  for tool in $TOOLS; do
    [[ "$tool" == racecheck ]] && continue
    for ex in basic_attention attention_c paged_decode "paged_decode --fp8" mla_decode; do
      read -r -a cmd <<<"$ex"
      [[ -x "$EX_DIR/${cmd[0]}" ]] || continue
      ex_args=()
      [[ "$tool" == initcheck && "${cmd[0]}" =~ ^(basic_attention|attention_c)$ ]] &&
        ex_args=(--check-api-memory-access no)
      name="ex-${cmd[0]}${cmd[1]:+-${cmd[1]#--}}"
      RESULT_NOTE="the exit code carries the example's own check" run_cmd "$name-$tool" "$tool" "$OUT/sanitize-$name-$tool.log" \
        "${ex_args[@]}" -- "$EX_DIR/${cmd[0]}" "${cmd[@]:1}"
    done
  done
fi

echo
cat "$SUMMARY"
exit $status
