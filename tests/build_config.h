// What this build compiled, for the host and the GPU tests alike:
// tests/CMakeLists.txt defines FLASH_TEST_HAS_HEAD_DIM_<d> for each head dim
// of FLASH_HEAD_DIMS.
#pragma once

#include <cstdint>

namespace flash::test {

// Head dims compiled into this build (FLASH_HEAD_DIMS).
inline bool head_dim_compiled(int64_t head_dim) {
  switch (head_dim) {
#ifdef FLASH_TEST_HAS_HEAD_DIM_32
    case 32: return true;
#endif
#ifdef FLASH_TEST_HAS_HEAD_DIM_64
    case 64: return true;
#endif
#ifdef FLASH_TEST_HAS_HEAD_DIM_96
    case 96: return true;
#endif
#ifdef FLASH_TEST_HAS_HEAD_DIM_128
    case 128: return true;
#endif
#ifdef FLASH_TEST_HAS_HEAD_DIM_192
    case 192: return true;
#endif
#ifdef FLASH_TEST_HAS_HEAD_DIM_256
    case 256: return true;
#endif
    default: return false;
  }
}

// Whether a call of this head dim runs in this build: a multiple of 8 up to
// 256 with a compiled head dim at least as wide (it runs on the next one).
inline bool head_dim_runs(int64_t head_dim) {
  if (head_dim < 8 || head_dim > 256 || head_dim % 8 != 0) return false;
  for (int64_t d : {32, 64, 96, 128, 192, 256}) {
    if (d >= head_dim && head_dim_compiled(d)) return true;
  }
  return false;
}

}  // namespace flash::test
