// The merge of partial attention results over disjoint key sets, one row
// at a time: shared by the split-KV combine (decode/combine_kernel.cuh)
// and flash::merge_states (kernels/merge/merge.cu).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "ptx.cuh"

namespace flash {

inline constexpr int kMergeMaxStates = 128;
inline constexpr int kMergeThreads = 128;

template <typename T>
__device__ __forceinline__ float merge_load(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return *p;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(*p);
  } else {
    return __half2float(*p);
  }
}

// Merges n <= kMergeMaxStates partial results of one row into (O, LSE):
// O = sum_s exp(lse_s - lse) O_s with lse = log(exp(sink) + sum_s
// exp(lse_s)): `sink` is an attention sink's logit, a state with no O
// (-inf: none). A row whose every lse_s (and sink) is -inf gets O = 0 and
// LSE -inf. Run by the CTA's
// kMergeThreads threads, all of them. State s of the row: LSE at
// lse_in[s * lse_stride], O's columns at o_in + s * o_stride (contiguous;
// the first `cols` <= kHeadDim of them are read and written). Every warp derives the weights from the LSEs, warp w
// sums the states w, w + 4, ... (loads independent and unrolled, so many
// are in flight), and warp 0 adds the four partial sums in a fixed order
// (deterministic). Lane l owns columns l, l + 32, ... lse_out may be null.
// Each warp's first kMergePreload states are loaded before the weights are
// known, so their loads and the LSEs' are in flight together (a split
// decode's combine waits on one round of loads instead of two).
inline constexpr int kMergePreload = 4;
template <int kHeadDim, typename In, typename Out>
__device__ __forceinline__ void merge_row(const In* o_in, int64_t o_stride, const float* lse_in, int64_t lse_stride,
                                          int n, int cols, float sink, Out* o_out, float* lse_out) {
  constexpr int kCols = kHeadDim / 32;
  constexpr int kWarps = kMergeThreads / 32;
  __shared__ float weights[kMergeMaxStates];
  __shared__ float partial[kWarps][kHeadDim];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const In* src = o_in + lane;
  float early[kMergePreload][kCols];
#pragma unroll
  for (int i = 0; i < kMergePreload; ++i) {
    const int s = warp + kWarps * i;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      early[i][c] = s < n && lane + c * 32 < cols ? merge_load(src + s * o_stride + c * 32) : 0.f;
    }
  }
  if (warp == 0) {
    float lse_s[kMergeMaxStates / 32];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < kMergeMaxStates / 32; ++i) {
      const int s = lane + 32 * i;
      lse_s[i] = s < n ? lse_in[s * lse_stride] : -INFINITY;
      m = fmaxf(m, lse_s[i]);
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    m = fmaxf(m, sink);
    float sum = 0.f;
    if (m != -INFINITY) {
#pragma unroll
      for (int i = 0; i < kMergeMaxStates / 32; ++i) sum += expf(lse_s[i] - m);  // expf(-inf) = 0
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (m != -INFINITY) sum += expf(sink - m);  // after the reduction: once per row
    const bool empty = m == -INFINITY || sum == 0.f;
    const float lse = empty ? -INFINITY : m + logf(sum);
#pragma unroll
    for (int i = 0; i < kMergeMaxStates / 32; ++i) {
      const int s = lane + 32 * i;
      if (s < n) weights[s] = empty ? 0.f : expf(lse_s[i] - lse);
    }
    if (lse_out != nullptr && lane == 0) *lse_out = lse;
  }
  __syncthreads();

  float acc[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) acc[c] = 0.f;
#pragma unroll
  for (int i = 0; i < kMergePreload; ++i) {
    const int s = warp + kWarps * i;
    if (s < n) {
      const float w = weights[s];
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        if (lane + c * 32 < cols) acc[c] = fmaf(w, early[i][c], acc[c]);
      }
    }
  }
#pragma unroll 8
  for (int s = warp + kWarps * kMergePreload; s < n; s += kWarps) {
    const float w = weights[s];
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      if (lane + c * 32 < cols) acc[c] = fmaf(w, merge_load(src + s * o_stride + c * 32), acc[c]);
    }
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) partial[warp][lane + c * 32] = acc[c];
  __syncthreads();
  if (warp == 0) {
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int col = lane + c * 32;
      if (col < cols)
        o_out[col] =
          ptx::from_float<Out>(((partial[0][col] + partial[1][col]) + partial[2][col]) + partial[3][col]);
    }
  }
}

}  // namespace flash
