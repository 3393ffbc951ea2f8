#!/usr/bin/env bash
# Times variants of the Hopper MLA kernel (kernels/sm90/mla_kernel.cuh)
# with mla_bench, interleaved: one build of the library at head dim 32
# (no sm90 prefill kernels, so a variant recompiles only the MLA
# instantiations), each variant a sed expression on the kernel's header
# (several separated by ";;"), "=path" (a file copied over the header) or
# "@file.patch" (its changes to the header applied); its mla_bench copied
# aside, the header put back. Variants that take work out of the kernel
# compute wrong results: they only time what is left.
#
#   OUT=out ROWS="64 8192 128 1;;64 8192 16 1" scripts/mla-ablate.sh 'base:' \
#     'nocopy:s/if (n_block + 1 < s_end) load_k/if (false) load_k/'
#
# Environment: ROWS (mla_bench argument lists, ";;"-separated; default the
# issue's 64 x 8192 x 128 row and its 16-head twin), ROUNDS (default 2),
# BUILD_DIR (default build/mla-ablate), NCU=1 (then profile the first
# variant on the first row: `ncu --clock-control none`, speed of light,
# warp states, shared-memory traffic and the stall samples per SASS line,
# read by scripts/ncu-stalls-by-role.py; the report and the per-line CSV
# go to $OUT/ncu-mla.tgz).
set -uo pipefail
OUT=${OUT:-$PWD/mla-ablate-out}
mkdir -p "$OUT/logs"
BUILD_DIR=${BUILD_DIR:-build/mla-ablate}
ROUNDS=${ROUNDS:-2}
header=kernels/sm90/mla_kernel.cuh
cp "$header" /tmp/mla_kernel.cuh.orig
restore() { cp /tmp/mla_kernel.cuh.orig "$header"; }
trap restore EXIT
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DFLASH_HEAD_DIMS=32 -DFLASH_BUILD_TESTS=OFF -DFLASH_BUILD_EXAMPLES=OFF >"$OUT/logs/configure.log" 2>&1 ||
  { tail -20 "$OUT/logs/configure.log"; exit 1; }
names=()
for spec in "$@"; do
  name=${spec%%:*}
  edits=${spec#*:}
  restore
  while [[ -n "$edits" ]]; do
    edit=${edits%%;;*}
    if [[ "$edits" == *";;"* ]]; then edits=${edits#*;;}; else edits=""; fi
    [[ -z "$edit" ]] && continue
    if [[ "$edit" == =* ]]; then
      cp "${edit#=}" "$header" || echo "[$name] WARNING: no ${edit#=}"
      continue
    fi
    if [[ "$edit" == @* ]]; then
      git apply --include="$header" "${edit#@}" || echo "[$name] WARNING: ${edit#@} did not apply"
      continue
    fi
    cp "$header" /tmp/mla_kernel.cuh.before
    sed -i "$edit" "$header"
    cmp -s "$header" /tmp/mla_kernel.cuh.before && echo "[$name] WARNING: '$edit' changed nothing"
  done
  t0=$(date +%s)
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target mla_bench >"$OUT/logs/build-$name.log" 2>&1 ||
    { echo "[$name] build FAILED"; grep -E "error" -A3 "$OUT/logs/build-$name.log" | head -20; continue; }
  echo "[$name] built in $(( $(date +%s) - t0 ))s; MLA spill lines: $(grep 'spill' "$OUT/logs/build-$name.log" | grep -c mla); wgmma serialised: $(grep -c 'serialized' "$OUT/logs/build-$name.log")"
  cp "$BUILD_DIR/bench/mla_bench" "/tmp/mla_bench-$name"
  names+=("$name")
done
restore
IFS=$'\n' read -r -d '' -a rows < <(printf '%s' "${ROWS:-64 8192 128 1;;64 8192 16 1}" | sed 's/;;/\n/g'; printf '\0')
for round in $(seq "$ROUNDS"); do
  for row in "${rows[@]}"; do
    for name in "${names[@]}"; do
      # shellcheck disable=SC2086  # the row is an argument list
      line=$(timeout 120 "/tmp/mla_bench-$name" $row sm90 2>&1 | tail -1)
      printf '%s | %s | round %s | %s\n' "$row" "$name" "$round" "$(echo "$line" | grep -oE '[0-9.]+ us, [0-9]+ GB/s \([0-9.]+ of the read|[0-9.]+ TFLOP/s \([0-9.]+ of the GEMM' | tr '\n' ' ')"
    done
  done
done | tee "$OUT/ablate.txt"
if [[ "${NCU:-0}" == 1 && ${#names[@]} -gt 0 ]]; then
  mkdir -p /tmp/ncu-mla
  # shellcheck disable=SC2086  # the row is an argument list
  ncu --clock-control none -k regex:mla_kernel --launch-skip 3 --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis \
    --section MemoryWorkloadAnalysis_Tables --section SourceCounters --import-source no \
    --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum \
    --export /tmp/ncu-mla/report --force-overwrite "/tmp/mla_bench-${names[0]}" ${rows[0]} sm90 >/tmp/ncu-mla/ncu.txt 2>&1
  ncu --import /tmp/ncu-mla/report.ncu-rep --page details >/tmp/ncu-mla/details.txt 2>&1
  grep -E "Duration|Throughput|Hit Rate|Issue Slots Busy|Executed Ipc|No Eligible|Warp Cycles Per Issued|hmma|Shared|Bank|inst_executed|wavefronts" \
    /tmp/ncu-mla/details.txt | cut -c1-200 | head -40
  ncu --import /tmp/ncu-mla/report.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip >/tmp/ncu-mla/source.csv.gz
  python3 scripts/ncu-stalls-by-role.py /tmp/ncu-mla/source.csv.gz 25 >/tmp/ncu-mla/stalls.txt 2>&1
  head -60 /tmp/ncu-mla/stalls.txt
  tar -C /tmp -czf "$OUT/ncu-mla.tgz" ncu-mla
fi
tar -C "$OUT" -czf "$OUT/logs.tgz" logs && rm -rf "$OUT/logs"
