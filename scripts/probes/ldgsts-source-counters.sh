#!/usr/bin/env bash
# Per-SASS-line counters of scripts/probes/ldgsts-wavefronts.cu's copy
# kernels (L2 sectors and shared-memory wavefronts an LDGSTS, by mapping),
# read with scripts/ncu-copy-sectors.py. On a GPU machine, from the
# repository root: scripts/probes/ldgsts-source-counters.sh
set -uo pipefail
nvcc -std=c++17 -arch=sm_90a -O3 -o /tmp/ldgsts scripts/probes/ldgsts-wavefronts.cu || exit 1
names=(linear swizzle split halves halves-n zfill ldg+sts)
for k in 0 1 3 4 6; do
  timeout 60 ncu --clock-control none -k "regex:copy_kernel<$k>" -c 1 --section SourceCounters \
    --import-source no -o "/tmp/ldgsts_$k" -f /tmp/ldgsts 1 >/dev/null 2>&1
  ncu --import "/tmp/ldgsts_$k.ncu-rep" --page source --csv --print-source sass >"/tmp/ldgsts_$k.csv" 2>/dev/null
  echo "== ${names[$k]}"
  scripts/ncu-copy-sectors.py "/tmp/ldgsts_$k.csv" 2>/dev/null | grep -E '^\| (LDGSTS|STS|LDG)' | head -3
done
