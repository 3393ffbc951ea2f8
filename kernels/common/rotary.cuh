// The rotary embedding's arithmetic, shared by the append kernel (which
// rotates the new keys and a copy of Q) and the decode kernel's kWrites
// variant (which does the append itself: it rotates its Q tile in place
// and the new keys), so both give the same bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace flash::rotary {

// The pair (x0, x1) turned by the angle whose cosine is c and sine s:
// (x0 c - x1 s, x0 s + x1 c), in float32 with every product rounded on its
// own (no contraction into FMAs), so a host doing the same float32
// operations gets the same values.
__device__ __forceinline__ float first(float x0, float x1, float c, float s) {
  return __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
}
__device__ __forceinline__ float second(float x0, float x1, float c, float s) {
  return __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

// The table row of a position: positions past the table use its last row.
__device__ __forceinline__ int table_row(int position, int positions) { return min(max(position, 0), positions - 1); }

template <typename T>
__device__ __forceinline__ float to_f32(T x);
template <>
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
template <>
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

// Element e (< 2 * half, the rotated columns) of `row` turned by its pair's
// angle: NeoX pairs (j, j + half), or interleaved pairs (2j, 2j + 1). The
// append kernel writes this value, rounded to the element type, into the
// cache; the decode kernel puts the same bits in its K tile.
template <typename T>
__device__ __forceinline__ float rotated_element(const T* row, int e, int half, bool interleaved,
                                                 const float* cos_row, const float* sin_row) {
  int j, other;
  bool is_first;
  if (interleaved) {
    j = e / 2, is_first = e % 2 == 0, other = is_first ? e + 1 : e - 1;
  } else {
    is_first = e < half, j = is_first ? e : e - half, other = is_first ? e + half : e - half;
  }
  const float c = __ldg(cos_row + j), s = __ldg(sin_row + j);
  const float x = to_f32(row[e]), y = to_f32(row[other]);
  return is_first ? first(x, y, c, s) : second(y, x, c, s);
}

}  // namespace flash::rotary
