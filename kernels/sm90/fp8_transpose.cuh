// The FP8 prefill's V^T (layout: fp8_vt.h), written by one kernel before the
// attention kernel: a CTA takes 128 columns of one (sequence, K/V head),
// reads the keys behind them as rows of V (head_dim bytes each) into shared
// memory and writes them out as head_dim rows of 128 bytes. Keys past the
// sequence's end are written as zeros, up to the next sequence's start, so
// every byte the attention kernel may read is written.
#pragma once

#include <cstdint>

#include "../params.h"
#include "../common/launch.cuh"
#include "fp8_vt.h"

namespace flash::sm90 {

inline constexpr int kFp8TransposeCols = 128;
inline constexpr int kFp8TransposeThreads = 256;

template <int kHeadDim>
__global__ void __launch_bounds__(kFp8TransposeThreads) fp8_transpose_v_kernel(const detail::FwdParams p) {
  constexpr int kPitch = kHeadDim + 16;  // bytes per key row in shared memory (16-byte aligned)
  __shared__ __align__(16) unsigned char tile[kFp8TransposeCols * kPitch];
  const int s = blockIdx.z;
  const int h = blockIdx.y;
  const bool varlen = p.cu_seqlens_k != nullptr;
  // Varlen offsets are clamped to total_k, the rows the workspace was sized
  // for: lengths past it (a caller's error) are cut, never written past it.
  const int64_t first_key =
      varlen ? min(static_cast<int64_t>(p.cu_seqlens_k[s]), p.total_k) : static_cast<int64_t>(s) * p.seqlen_k;
  const int64_t next_key =
      varlen ? max(first_key, min(static_cast<int64_t>(p.cu_seqlens_k[s + 1]), p.total_k)) : first_key + p.seqlen_k;
  const int len = static_cast<int>(next_key - first_key);
  const int64_t start = fp8_vt_start(first_key, s);
  const int64_t cols = fp8_vt_start(next_key, s + 1) - start;

  const unsigned char* v = static_cast<const unsigned char*>(p.v) + h * p.v_head_stride +
                           (varlen ? first_key * p.v_seq_stride : static_cast<int64_t>(s) * p.v_batch_stride);
  unsigned char* const out_head = static_cast<unsigned char*>(p.fp8_vt) +
                                  static_cast<int64_t>(h) * kHeadDim * p.fp8_vt_cols + start;
  constexpr int kRowChunks = kHeadDim / 16;
  constexpr int kColChunks = kFp8TransposeCols / 16;
  // The grid is sized from seqlen_k, which varlen callers give as a hint:
  // the CTAs stride over whatever columns the sequence has.
  for (int64_t c0 = static_cast<int64_t>(blockIdx.x) * kFp8TransposeCols; c0 < cols;
       c0 += static_cast<int64_t>(gridDim.x) * kFp8TransposeCols) {
    for (int i = threadIdx.x; i < kFp8TransposeCols * kRowChunks; i += kFp8TransposeThreads) {
      const int r = i / kRowChunks;
      const int ch = i % kRowChunks;
      const int64_t key = c0 + r;
      uint4 val = make_uint4(0u, 0u, 0u, 0u);
      if (key < len) val = *reinterpret_cast<const uint4*>(v + key * p.v_seq_stride + ch * 16);
      *reinterpret_cast<uint4*>(tile + r * kPitch + ch * 16) = val;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kHeadDim * kColChunks; i += kFp8TransposeThreads) {
      const int d = i / kColChunks;
      const int ch = i % kColChunks;
      if (c0 + ch * 16 >= cols) continue;  // columns come in whole 16s (starts are 16-aligned)
      uint32_t w[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        uint32_t word = 0;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = ch * 16 + 4 * j + e;  // within the CTA's 128, so within a 32-group from the sequence start
          const int key = (c & ~31) | fp8_key_of_column(c & 31);
          word |= static_cast<uint32_t>(tile[key * kPitch + d]) << (8 * e);
        }
        w[j] = word;
      }
      *reinterpret_cast<uint4*>(out_head + static_cast<int64_t>(d) * p.fp8_vt_cols + c0 + ch * 16) =
          make_uint4(w[0], w[1], w[2], w[3]);
    }
    __syncthreads();  // the tile is read before the next columns overwrite it
  }
}

// Launches the transpose of every sequence's V (p.fp8_vt, p.fp8_vt_cols
// set). The grid covers p.seqlen_k's columns a sequence (a varlen call's
// hint: longer sequences take more than one pass of their CTAs).
template <int kHeadDim>
cudaError_t launch_fp8_transpose_v(const detail::FwdParams& p, cudaStream_t stream) {
  const int64_t chunks =
      (static_cast<int64_t>(p.seqlen_k) + kFp8VtSlack + 15 + kFp8TransposeCols - 1) / kFp8TransposeCols;
  if (chunks > INT32_MAX || p.heads_kv > 65535 || p.batch > 65535) return cudaErrorInvalidValue;
  return launch_kernel(fp8_transpose_v_kernel<kHeadDim>, dim3(static_cast<unsigned>(chunks), p.heads_kv, p.batch),
                       dim3(kFp8TransposeThreads), 0, stream, p);
}

}  // namespace flash::sm90
