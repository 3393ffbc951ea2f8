// Host-side entry point of flash::merge_states' kernel (merge.cu): plain C++.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "flash/flash.hpp"

namespace flash::merge {

// One checked merge call (src/merge.cpp fills it after validate()).
struct MergeArgs {
  const void* o_states;
  const float* lse_states;
  void* o;
  float* lse;  // may be null
  int64_t o_state_stride, lse_state_stride;
  int64_t in_batch_stride, in_seq_stride, in_head_stride;
  int64_t out_batch_stride, out_seq_stride, out_head_stride;
  int num_states;
  int head_dim;  // columns of a row, at most 256
  int batch, seqlen_q, heads;  // batch * heads * seqlen_q rows, below 2^31
};

// Launches the merge for `dtype`: one CTA per row. cudaErrorInvalidValue
// for a head dim outside 1..256.
cudaError_t launch_merge(const MergeArgs& args, DType dtype, cudaStream_t stream);

}  // namespace flash::merge
