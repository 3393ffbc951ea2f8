#!/usr/bin/env bash
# Compiles kernel instantiation files one by one into cubins, with ptxas's
# resource report beside each, so that SASS and spills can be compared
# without a GPU or a full build (scripts/sass-diff.py --glob '*.cubin'
# reads the folders). Run from a source tree's root:
#
#   scripts/cubins.sh OUT [ARCH] [FILE...]
#
# OUT gets NAME.cubin and NAME.log (ptxas -v) per file; ARCH defaults to
# sm_90a; FILE defaults to kernels/sm90/instantiations/*.cu (e.g.
# kernels/sm80/instantiations/*.cu with sm_80). JOBS compiles in parallel
# (default: the number of cores). The generated flash/version.h comes from
# a configured build (BUILD_DIR, default build/release) or, failing that,
# from cmake/version.h.in with the project's version filled in.
set -euo pipefail
out=${1:?usage: scripts/cubins.sh OUT [ARCH] [FILE...]}
arch=${2:-sm_90a}
shift $(( $# >= 2 ? 2 : 1 ))
files=("$@")
[[ ${#files[@]} -eq 0 ]] && files=(kernels/sm90/instantiations/*.cu)
mkdir -p "$out"
inc=${BUILD_DIR:-build/release}/include
if [[ ! -f $inc/flash/version.h ]]; then
  inc=$(mktemp -d)
  trap 'rm -rf "$inc"' EXIT
  mkdir -p "$inc/flash"
  ver=$(sed -n 's/^project(flash VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
  IFS=. read -r major minor patch <<<"${ver:-0.0.0}"
  sed -e "s/@PROJECT_VERSION_MAJOR@/$major/g" -e "s/@PROJECT_VERSION_MINOR@/$minor/g" \
      -e "s/@PROJECT_VERSION_PATCH@/$patch/g" -e "s/@PROJECT_VERSION@/$ver/g" \
      cmake/version.h.in >"$inc/flash/version.h"
fi
compile() {
  local f=$1 n
  n=$(basename "$f" .cu)
  if nvcc -I include -I "$inc" -I . -I kernels -I src -O3 -DNDEBUG -arch="$arch" -std=c++17 -Xptxas -v \
      -cubin -o "$out/$n.cubin" "$f" >"$out/$n.log" 2>&1; then
    echo "$n: $(grep -c 'Compiling entry' "$out/$n.log") kernels, $(grep 'bytes spill stores' "$out/$n.log" |
      awk '{s += $5; if ($5 > 0) k++} END {printf "%d bytes of spill stores in %d", s, k}')"
  else
    echo "$n: FAILED (see $out/$n.log)"
  fi
}
export -f compile
export out arch inc
printf '%s\n' "${files[@]}" | xargs -P "${JOBS:-$(nproc)}" -I{} bash -c 'compile "$@"' _ {}
