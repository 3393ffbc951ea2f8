// The power of two that brings a bf16 row of Q into fp16's range, where the
// fp8-cache kernels run their tensor cores on fp16 (the decode kernel's Q
// load, the Hopper kernel's Mainloop::convert_q): plain arithmetic with no
// device code, so a host test can check its contract over every bf16 value.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FLASH_FP16_ROW_SCALE_FN __host__ __device__ __forceinline__
#else
#define FLASH_FP16_ROW_SCALE_FN inline
#endif

namespace flash::fp8 {

// e such that 2^e times the row's largest magnitude, whose bf16 bits (sign
// cleared) are `largest`, lies in [2^14, 2^15), below fp16's largest finite
// value. Every element of the row at least 2^-31 of the largest is then
// exact in fp16 (bf16's 8 significant bits within fp16's 11, at or above
// its subnormal spacing 2^-24); a smaller one rounds to that spacing, an
// error of at most 2^-39 of the largest. e is at most 126, so 2^e and 2^-e
// are normal floats: a row whose largest is below 2^-112 (all-zero and
// subnormal rows among them) lands below 2^14 and keeps fewer of its small
// elements. A row holding an infinity or a NaN gets e = -114 and keeps
// them.
FLASH_FP16_ROW_SCALE_FN int fp16_row_exponent(uint32_t largest) {
  const int e = 141 - static_cast<int>(largest >> 7);
  return e < 126 ? e : 126;
}

}  // namespace flash::fp8
