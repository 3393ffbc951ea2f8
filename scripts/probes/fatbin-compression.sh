#!/usr/bin/env bash
# What nvcc's fatbin compression costs at load time. The release build's
# executables each carry every kernel (about 300 MB with nvcc's default
# compression, `--compress-mode=default`, which is `balance`); `size`, the
# build's default (FLASH_FATBIN_COMPRESSION), makes them about six times
# smaller and decompresses more slowly (nvcc 13.0, the release
# configuration, every head dim: libflash.a 318 -> 55 MB; one sm80
# instantiation's object 6.8 -> 1.1 MB, 12.6 uncompressed). This builds
# the library and examples/basic_attention twice, `--compress-mode=default`
# and `--compress-mode=size` (CMAKE_CUDA_FLAGS, which takes precedence over
# FLASH_FATBIN_COMPRESSION; tests and bench off, every head dim, sm_80 +
# sm_90a as the release preset), prints each build's libflash.a and basic_attention
# sizes, then times whole basic_attention processes (context, first call,
# its host check) interleaved, ROUNDS each, with lazy module loading (the
# CUDA default) and eager. Run on the device machine from the repository
# root; build logs under $OUT on a failed build.
set -uo pipefail
OUT=${OUT:-.}
ROUNDS=${ROUNDS:-5}
modes=(default size)
build() {
  local mode=$1 dir=build/fatbin-$1
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS="--compress-mode=$mode" \
    -DFLASH_BUILD_TESTS=OFF -DFLASH_BUILD_BENCH=OFF -DFLASH_BUILD_PYTHON=OFF -DFLASH_BUILD_CP=OFF \
    >"$OUT/build-$mode.log" 2>&1 &&
    cmake --build "$dir" -j "$(nproc)" --target basic_attention >>"$OUT/build-$mode.log" 2>&1
}
for m in "${modes[@]}"; do
  start=$(date +%s)
  build "$m" || { tail -20 "$OUT/build-$m.log"; exit 1; }
  echo "build $m: $(($(date +%s) - start)) s"
  rm -f "$OUT/build-$m.log"
done
echo "| mode | libflash.a MB | basic_attention MB |"
for m in "${modes[@]}"; do
  d=build/fatbin-$m
  printf '| %s | %.1f | %.1f |\n' "$m" "$(stat -c %s "$d/libflash.a" | awk '{print $1 / 1e6}')" \
    "$(stat -c %s "$d/examples/basic_attention" | awk '{print $1 / 1e6}')"
done
echo "| mode | loading | round | wall s | exit |"
for loading in LAZY EAGER; do
  for r in $(seq "$ROUNDS"); do
    for m in "${modes[@]}"; do
      t0=$(date +%s.%N)
      CUDA_MODULE_LOADING=$loading build/fatbin-$m/examples/basic_attention >/dev/null 2>&1
      rc=$?
      t1=$(date +%s.%N)
      printf '| %s | %s | %d | %.3f | %d |\n' "$m" "$loading" "$r" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$rc"
    done
  done
done
