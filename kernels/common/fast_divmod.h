// Division by a divisor fixed for a whole launch, as a multiply and a
// shift. A runtime integer division is ~20 SASS instructions (a float
// reciprocal, its conversion and two corrections); the tile walk of a
// persistent kernel runs several a tile, in code fetched once a tile.
// The host computes the multiplier; the device divides with one
// multiply-high and one shift.
//
// For a divisor d >= 2 with l = ceil(log2 d): multiplier = ceil(2^(31+l) /
// d), which fits 32 bits, and n / d = (n * multiplier) >> (31 + l) for
// every 0 <= n < 2^31 (the rounding up adds n * e / (d 2^(31+l)) < 1/d,
// e < d, to n / d, which never reaches the next integer). d = 1 keeps
// multiplier 0 and returns n. Plain C++ on the host, so FwdParams can
// carry it.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FLASH_FAST_DIVMOD_FN __host__ __device__ __forceinline__
#else
#define FLASH_FAST_DIVMOD_FN inline
#endif

namespace flash {

struct FastDivmod {
  int32_t divisor;      // d; 0: never divided by (a count that may be 0)
  uint32_t multiplier;  // 0 for d <= 1
  uint32_t shift;       // l - 1: the shift after the multiply-high

  // d >= 0; d = 0 makes a divider that must not be used.
  static FastDivmod make(int32_t d) {
    FastDivmod f{d, 0u, 0u};
    if (d >= 2) {
      uint32_t l = 0;
      while ((int64_t{1} << l) < d) ++l;
      const uint64_t scale = uint64_t{1} << (31 + l);
      f.multiplier = static_cast<uint32_t>((scale + static_cast<uint64_t>(d) - 1) / static_cast<uint64_t>(d));
      f.shift = l - 1;
    }
    return f;
  }

  // n / d for 0 <= n < 2^31.
  FLASH_FAST_DIVMOD_FN int32_t div(int32_t n) const {
    if (multiplier == 0) return n;  // d = 1
#if defined(__CUDA_ARCH__)
    return static_cast<int32_t>(__umulhi(static_cast<uint32_t>(n), multiplier) >> shift);
#else
    return static_cast<int32_t>((static_cast<uint64_t>(static_cast<uint32_t>(n)) * multiplier >> 32) >> shift);
#endif
  }

  // q = n / d, r = n % d, for 0 <= n < 2^31.
  FLASH_FAST_DIVMOD_FN void divmod(int32_t n, int32_t* q, int32_t* r) const {
    *q = div(n);
    *r = n - *q * divisor;
  }
};

}  // namespace flash

#undef FLASH_FAST_DIVMOD_FN
