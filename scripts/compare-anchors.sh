#!/usr/bin/env bash
# flash beside an anchor library in one process (bench/compare.py), on the
# GPU machine: installs a wheel bundle carried in .anchors/ (see
# ../shared/anchors/README.md; carry ".anchors" with the call), builds the
# Python extension for HEAD_DIMS only, then runs compare.py under a timeout,
# its log and JSON written to $OUT as each sweep ends.
#
#   OUT=out BUNDLE=fi COMPARE_ARGS="--serving --libs flash,flashinfer" scripts/compare-anchors.sh
#   OUT=out BUNDLE=fa4 COMPARE_ARGS="--seed --libs flash,cudnn,fa4" scripts/compare-anchors.sh
#
# Environment: BUNDLE (fi or fa4; none: PyTorch's own backends only),
# HEAD_DIMS (default "64;128;256"), COMPARE_ARGS, COMPARE_TIMEOUT (seconds,
# default 420), BUILD_DIR (default build/h100, the h100 preset's).
set -uo pipefail
OUT=${OUT:-$PWD/compare-out}
mkdir -p "$OUT"
HEAD_DIMS=${HEAD_DIMS:-64;128;256}
BUILD_DIR=${BUILD_DIR:-build/h100}
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$OUT/compare-summary.txt"; }

site=/tmp/anchor-site
export PYTHONPATH="$BUILD_DIR/python"
if [[ -n "${BUNDLE:-}" ]]; then
  bundle=.anchors/${BUNDLE}-wheels.tar.xz
  [[ -f "$bundle" ]] || { say "no $bundle (carry .anchors with the call)"; exit 1; }
  rm -rf /tmp/anchor-wheels && mkdir -p /tmp/anchor-wheels
  python3 -c "import sys,tarfile;tarfile.open(sys.argv[1]).extractall(sys.argv[2],filter='data')" \
    "$bundle" /tmp/anchor-wheels &&
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
      $(find /tmp/anchor-wheels -name '*.whl') >"$OUT/pip.log" 2>&1 || { say "wheel install FAILED"; tail -5 "$OUT/pip.log"; exit 1; }
  PYTHONPATH="$site:$PYTHONPATH"
  [[ -d "$site/nvidia_cutlass_dsl/dsl_packages" ]] && PYTHONPATH="$site/nvidia_cutlass_dsl/dsl_packages:$PYTHONPATH"
  say "installed $bundle"
fi

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DFLASH_HEAD_DIMS="$HEAD_DIMS" -DFLASH_BUILD_PYTHON=ON -DFLASH_BUILD_TESTS=OFF -DFLASH_BUILD_BENCH=OFF \
  -DFLASH_BUILD_EXAMPLES=OFF -DPython_EXECUTABLE="$(command -v python3)" >"$OUT/compare-build.log" 2>&1 &&
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target _flash >>"$OUT/compare-build.log" 2>&1 ||
  { say "build FAILED"; grep -E "error" -A3 "$OUT/compare-build.log" | head -30; exit 1; }
say "built _flash (head dims $HEAD_DIMS)"

PYTHONUNBUFFERED=1 timeout "${COMPARE_TIMEOUT:-420}" python3 bench/compare.py ${COMPARE_ARGS:-} \
  --json "$OUT/compare.json" >"$OUT/compare.log" 2>"$OUT/compare-progress.log"
rc=$?
[[ $rc == 124 ]] && say "compare.py TIMED OUT after ${COMPARE_TIMEOUT:-420}s (the JSON holds the sweeps that ended)"
say "compare.py rc=$rc"
# The tables (and the notes under them).
sed -n '/^|/,/^$/p' "$OUT/compare.log"
