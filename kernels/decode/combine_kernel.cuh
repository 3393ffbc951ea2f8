// The split-KV combine: merges the partial (O, LSE) results the decode,
// sm80 and sm90 kernels write to the workspace, in a fixed order
// (deterministic).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../common/merge_row.cuh"
#include "../common/ptx.cuh"
#include "../common/seqlen.cuh"
#include "../params.h"

namespace flash::decode {

// Merges the num_splits partial results of each (batch, head, token) row
// (merge_row, kernels/common/merge_row.cuh), one CTA per row.
template <int kHeadDim, typename Element>
__global__ void __launch_bounds__(kMergeThreads) combine_kernel(const __grid_constant__ detail::FwdParams p) {
  const int64_t row = blockIdx.x;  // over [batch, heads_q, seqlen_q]
  const int64_t rows = static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q;
  const int token = static_cast<int>(row % p.seqlen_q);
  const int head = static_cast<int>((row / p.seqlen_q) % p.heads_q);
  const int batch = static_cast<int>(row / (static_cast<int64_t>(p.seqlen_q) * p.heads_q));
  // Where the row lives, and the sinks: no kernel of the call writes them
  // (an append writes the key lengths, which the combine does not need),
  // so they are read before the wait below.
  const QueryRows seq(p, batch);
  // The splits' partials leave out the attention sink: it counts once, here.
  const float sink = p.sinks != nullptr ? p.sinks[head] : -INFINITY;
  if (token >= seq.len_q) return;  // uniform across the CTA

  float* lse = nullptr;
  if (p.lse != nullptr) {
    lse = p.lse + (p.cu_seqlens_q != nullptr
                       ? static_cast<int64_t>(head) * p.cu_seqlens_q[p.batch] + seq.q_start + token
                       : (static_cast<int64_t>(batch) * p.heads_q + head) * p.seqlen_q + token);
  }
  Element* o = static_cast<Element*>(p.o) + seq.o_offset + static_cast<int64_t>(token) * p.o_seq_stride +
               static_cast<int64_t>(head) * p.o_head_stride;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Launched as a programmatic dependent of decode_kernel (sm_90+): wait
  // for its partial results to be complete and visible.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  // Split s of the row sits `rows` slots after split s - 1.
  merge_row<kHeadDim>(p.o_partial + row * kHeadDim, rows * kHeadDim, p.lse_partial + row, rows, p.num_splits, p.head_dim_v, sink,
                      o, lse);
}

// Makes `config` a programmatic dependent launch of the kernel before it on
// the stream (sm_90+), through `attribute`, which must outlive the launch.
inline void allow_programmatic_launch(cudaLaunchConfig_t* config, cudaLaunchAttribute* attribute) {
  *attribute = {};
  attribute->id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute->val.programmaticStreamSerializationAllowed = 1;
  config->attrs = attribute;
  config->numAttrs = 1;
}

// Launches the combine of p's splits: one CTA per (batch, head, query) row
// (the caller has checked that their number fits gridDim.x). With
// `programmatic` it launches as a programmatic dependent of the kernel
// before it on the stream (both compiled for sm_90 or newer): its CTAs
// start once every CTA of that kernel has started (decode_kernel triggers
// them first thing) and wait for its results.
template <int kHeadDim, typename Element>
cudaError_t launch_combine(const detail::FwdParams& p, cudaStream_t stream, bool programmatic = false) {
  const int64_t rows = static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(rows));
  config.blockDim = dim3(128);
  config.stream = stream;
  cudaLaunchAttribute attribute;
  if (programmatic) allow_programmatic_launch(&config, &attribute);
  return cudaLaunchKernelEx(&config, &combine_kernel<kHeadDim, Element>, p);
}

}  // namespace flash::decode
