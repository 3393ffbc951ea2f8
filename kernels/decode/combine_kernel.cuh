// The split-KV combine: merges the partial (O, LSE) results decode_kernel
// writes to the workspace, in a fixed order (deterministic).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../common/ptx.cuh"
#include "../common/seqlen.cuh"
#include "../params.h"

namespace flash::decode {

// Merges the num_splits partial results of each (batch, head, token) row:
// O = sum_s exp(lse_s - lse) O_s with lse = log sum_s exp(lse_s). One CTA
// per row: every warp derives the split weights from the LSEs, warp w sums
// the splits w, w + 4, ... (loads independent and unrolled, so many are in
// flight: a dependent load per split made an earlier version latency-bound),
// and warp 0 adds the four partial sums in a fixed order (deterministic).
// Lane l owns columns l, l + 32, ...
template <int kHeadDim, typename Element>
__global__ void __launch_bounds__(128) combine_kernel(const __grid_constant__ detail::FwdParams p) {
  constexpr int kCols = kHeadDim / 32;
  constexpr int kMaxSplits = 128;
  constexpr int kWarps = 4;
  __shared__ float weights[kMaxSplits];
  __shared__ float partial[kWarps][kHeadDim];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Launched as a programmatic dependent of decode_kernel (sm_90+): wait
  // for its partial results to be complete and visible.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int64_t row = blockIdx.x;  // over [batch, heads_q, seqlen_q]
  const int64_t rows = static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q;
  const int token = static_cast<int>(row % p.seqlen_q);
  const int head = static_cast<int>((row / p.seqlen_q) % p.heads_q);
  const int batch = static_cast<int>(row / (static_cast<int64_t>(p.seqlen_q) * p.heads_q));
  const SeqInfo seq(p, batch);
  if (token >= seq.len_q) return;  // uniform across the CTA

  const int64_t split_stride = rows;  // slots between consecutive splits
  const int n = p.num_splits;
  if (warp == 0) {
    float lse_s[kMaxSplits / 32];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < kMaxSplits / 32; ++i) {
      const int s = lane + 32 * i;
      lse_s[i] = s < n ? p.lse_partial[s * split_stride + row] : -INFINITY;
      m = fmaxf(m, lse_s[i]);
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float sum = 0.f;
    if (m != -INFINITY) {
#pragma unroll
      for (int i = 0; i < kMaxSplits / 32; ++i) sum += expf(lse_s[i] - m);  // expf(-inf) = 0
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    const bool empty = m == -INFINITY || sum == 0.f;
    const float lse = empty ? -INFINITY : m + logf(sum);
#pragma unroll
    for (int i = 0; i < kMaxSplits / 32; ++i) {
      const int s = lane + 32 * i;
      if (s < n) weights[s] = empty ? 0.f : expf(lse_s[i] - lse);
    }
    if (p.lse != nullptr && lane == 0) {
      const int64_t at = p.cu_seqlens_q != nullptr
                             ? static_cast<int64_t>(head) * p.cu_seqlens_q[p.batch] + seq.q_start + token
                             : (static_cast<int64_t>(batch) * p.heads_q + head) * p.seqlen_q + token;
      p.lse[at] = lse;
    }
  }
  __syncthreads();

  float acc[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) acc[c] = 0.f;
  const float* src = p.o_partial + row * kHeadDim + lane;
#pragma unroll 8
  for (int s = warp; s < n; s += kWarps) {
    const float w = weights[s];
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[c] = fmaf(w, src[s * split_stride * kHeadDim + c * 32], acc[c]);
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) partial[warp][lane + c * 32] = acc[c];
  __syncthreads();
  if (warp == 0) {
    Element* o = static_cast<Element*>(p.o) + seq.o_offset + static_cast<int64_t>(token) * p.o_seq_stride +
                 static_cast<int64_t>(head) * p.o_head_stride + lane;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int col = lane + c * 32;
      o[c * 32] = ptx::from_float<Element>(((partial[0][col] + partial[1][col]) + partial[2][col]) + partial[3][col]);
    }
  }
}

// Launches the combine of p's splits: one CTA per (batch, head, query) row
// (the caller has checked that their number fits gridDim.x). With
// `programmatic` it launches as a programmatic dependent of the kernel
// before it on the stream (both compiled for sm_90 or newer): its CTAs
// start while that kernel's last ones finish and wait for its results.
template <int kHeadDim, typename Element>
cudaError_t launch_combine(const detail::FwdParams& p, cudaStream_t stream, bool programmatic = false) {
  const int64_t rows = static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(rows));
  config.blockDim = dim3(128);
  config.stream = stream;
  cudaLaunchAttribute attribute = {};
  if (programmatic) {
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  return cudaLaunchKernelEx(&config, &combine_kernel<kHeadDim, Element>, p);
}

}  // namespace flash::decode
