// The per-element mask's bit words (mask.cuh, apply_right_mask_words): plain arithmetic
// with no device code, so host tests can check it against the per-column
// rule.
//
// In the mma/wgmma accumulator layout a thread holds, of each row of an S
// fragment of kN n8 tiles, the columns 8 nt + 2 (lane % 4) + e, e in {0, 1}.
// Numbered t = 2 nt + e they increase with t, so the keys a row sees, an
// interval of columns, are a run of t: one 32-bit word per 32 values of t
// holds them.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FLASH_MASK_BITS_FN __host__ __device__ __forceinline__
#else
#define FLASH_MASK_BITS_FN inline
#endif

namespace flash::mask_bits {

// How many of a row's 2 * kN values of t have column 8 nt + e below x, x
// counted from the thread's first column (col0 + 2 (lane % 4)).
template <int kN>
FLASH_MASK_BITS_FN int below(int x) {
  if (x <= 0) return 0;
  const int q = x >> 3;
  const int rest = (x & 7) < 2 ? (x & 7) : 2;
  return q >= kN ? 2 * kN : 2 * q + rest;
}

// The first n bits of a word, n clamped to [0, 32].
FLASH_MASK_BITS_FN uint32_t first_bits(int n) {
  return n >= 32 ? 0xffffffffu : (n <= 0 ? 0u : (1u << n) - 1u);
}

// Word w of a row's visible bits: bit i is t = 32 w + i, set when the
// row sees that column. seen_begin and seen_end are below() of the row's
// first visible key and of one past its last.
FLASH_MASK_BITS_FN uint32_t word(int seen_begin, int seen_end, int w) {
  return first_bits(seen_end - 32 * w) & ~first_bits(seen_begin - 32 * w);
}

}  // namespace flash::mask_bits

#undef FLASH_MASK_BITS_FN
