// Where the FP8 prefill keeps V^T (kernels/sm90/fp8_kernel.cuh): e4m3 wgmma
// reads its B operand only K-major, so before the attention kernel V is
// written transposed into the call's workspace, one row of one-byte
// columns per (K/V head, head-dim row):
//   vt[h][d][fp8_vt_start(k_0(s), s) + c]   for sequence s,
// k_0(s) its first key in packed K/V (varlen) or s * seqlen_k (dense). A
// sequence's columns run up to the next one's start: its keys, then at least
// 225 zero columns, so a key block (at most 224 keys) that starts before its
// end never reaches the next sequence (whose V might hold e4m3's NaN codes; P's zeros
// there would not cancel them). Within each 32 columns from the sequence's start, column
// c holds key fp8_key_of_column(c) of those 32 (the order P's e4m3 register
// fragment has its keys in, mainloop.cuh). Plain arithmetic, shared by the
// host (workspace size) and the kernels.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FLASH_FP8_VT_FN __host__ __device__ __forceinline__
#else
#define FLASH_FP8_VT_FN inline
#endif

namespace flash::sm90 {

// Columns of slack a sequence: after rounding to 16, at least 225.
inline constexpr int64_t kFp8VtSlack = 240;

// First column of sequence s: 16-byte aligned, kFp8VtSlack columns a
// sequence of slack, so that a sequence of n keys has at least n + 225.
FLASH_FP8_VT_FN int64_t fp8_vt_start(int64_t first_key, int64_t s) {
  return (first_key + kFp8VtSlack * s + 15) / 16 * 16;
}

// Columns of V^T per row: the start a sequence `batch` would have.
FLASH_FP8_VT_FN int64_t fp8_vt_cols(int64_t total_keys, int64_t batch) { return fp8_vt_start(total_keys, batch); }

// The key (0..31, within a 32-column group) that column c of the group holds.
FLASH_FP8_VT_FN int fp8_key_of_column(int c) {
  return 16 * (c / 16) + 2 * ((c % 16) / 4) + (c % 2) + 8 * ((c % 4) / 2);
}

}  // namespace flash::sm90
