// e4m3 (fp8) cache bytes to fp16 / bf16 pairs in registers, exactly.
//
// An e4m3 byte s.eeee.mmm moved into a 16-bit float so that its exponent
// and mantissa bits land at the top of the wider fields is the same value
// times a power of two: 2^-8 as fp16 (exponent bias 15 against 7), 2^-120
// as bf16 (127 against 7), subnormals included (an e4m3 subnormal becomes
// an fp16 normal, a bf16 subnormal). One multiply by the power of two
// (exact: no rounding, no overflow, subnormals kept: fma.rn without .ftz)
// restores the value. Every finite e4m3 value is representable in both
// types. The NaN encodings (0x7f, 0xff) come out as +-480 by this integer
// form (pair), NaN by the hardware conversion (f16_pair, f16_pairs).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "fp16_row_scale.h"

namespace flash::fp8 {

// Byte selectors for prmt: bytes a and b of a word into bits 8..15 and
// 24..31 of the result (selector), or into bits 0..7 and 16..23 (low_selector),
// zeros elsewhere (selector nibble 4 = the zero operand).
constexpr uint32_t selector(int a, int b) { return 0x0404u | (static_cast<uint32_t>(a) << 4) | (static_cast<uint32_t>(b) << 12); }
__host__ __device__ constexpr uint32_t low_selector(uint32_t sel) { return ((sel >> 4) & 0x000fu) | 0x0040u | ((sel >> 4) & 0x0f00u) | 0x4000u; }
inline constexpr uint32_t kBytes01 = selector(0, 1);  // bytes 0, 1: (lo, hi)
inline constexpr uint32_t kBytes23 = selector(2, 3);
inline constexpr uint32_t kBytes02 = selector(0, 2);
inline constexpr uint32_t kBytes13 = selector(1, 3);

__device__ __forceinline__ uint32_t prmt(uint32_t w, uint32_t sel) {
  uint32_t x;
  asm("prmt.b32 %0, %1, 0, %2;\n" : "=r"(x) : "r"(w), "r"(sel));
  return x;
}

// Bytes a and b (per kSelector) of `w`, two e4m3 values, as a packed pair of
// Element: byte a in the low half. With x = byte << 8 in each half and m its
// magnitude (byte & 0x7f), the sign stays at bit 15 and the magnitude moves
// down by 4 (bf16) or 1 (fp16): x - m * 240, or x - m * 128, one integer
// multiply-add (the magnitudes of all four bytes are masked once per word).
template <typename Element, uint32_t kSelector>
__device__ __forceinline__ uint32_t pair(uint32_t w) {
  const uint32_t x = prmt(w, kSelector);
  constexpr uint32_t kLow = low_selector(kSelector);
  const uint32_t m = prmt(w & 0x7f7f7f7fu, kLow);
  uint32_t y;
  if constexpr (std::is_same_v<Element, __nv_bfloat16>) {
    const uint32_t bits = x - m * 240u;
    // * 2^120 (bf16 0x7b80), + -0 so that signed zeros stay.
    asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(y) : "r"(bits), "r"(0x7b807b80u), "r"(0x80008000u));
  } else {
    static_assert(std::is_same_v<Element, __half>, "Element must be __half or __nv_bfloat16");
    const uint32_t bits = x - m * 128u;
    // * 2^8 (fp16 0x5c00).
    asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(y) : "r"(bits), "r"(0x5c005c00u));
  }
  return y;
}

// Bytes 0, 1 (kHigh: 2, 3) of `w` as a packed f16 pair, byte 0 (2) in the
// low half, by the hardware conversion (sm_89 and later). Finite codes
// come out exactly as from pair<__half>; the NaN codes come out NaN.
template <bool kHigh>
__device__ __forceinline__ uint32_t f16_pair(uint32_t w) {
  const uint16_t bytes = static_cast<uint16_t>(kHigh ? w >> 16 : w);
  uint32_t y;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(y) : "h"(bytes));
  return y;
}

// Both pairs of `w` as packed f16 pairs: bytes 0, 1 into `lo` (byte 0 in
// its low half) and bytes 2, 3 into `hi`. On sm_89 and later by the
// hardware conversion, one instruction a pair (the upper pair read through
// the conversion's half selector, no shift): finite codes exactly, the NaN
// codes NaN. Before sm_89 by pair<__half>'s integer form (NaN codes +-480).
__device__ __forceinline__ void f16_pairs(uint32_t w, uint32_t& lo, uint32_t& hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("{\n"
      "  .reg .b16 l, h;\n"
      "  mov.b32 {l, h}, %2;\n"
      "  cvt.rn.f16x2.e4m3x2 %0, l;\n"
      "  cvt.rn.f16x2.e4m3x2 %1, h;\n"
      "}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
#else
  lo = pair<__half, kBytes01>(w);
  hi = pair<__half, kBytes23>(w);
#endif
}

// Bytes 0, 2 of `w` into `even` and bytes 1, 3 into `odd`, as f16_pairs
// gives them (what a transposing ldmatrix of e4m3 bytes holds: two keys of
// one column in bytes 0 / 2, of the next column in 1 / 3).
__device__ __forceinline__ void f16_pairs_interleaved(uint32_t w, uint32_t& even, uint32_t& odd) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  f16_pairs(prmt(w, 0x3120u), even, odd);
#else
  even = pair<__half, kBytes02>(w);
  odd = pair<__half, kBytes13>(w);
#endif
}

}  // namespace flash::fp8
