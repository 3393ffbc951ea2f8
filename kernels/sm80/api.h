// Host-side entry points of the sm80 forward kernels: plain C++ declarations,
// defined by one .cu file per (dtype, head_dim) in instantiations/.
#pragma once

#include <cuda_runtime_api.h>

#include "../params.h"
#include "flash/flash.hpp"

namespace flash::sm80 {

// Launches compiled configuration `candidate` (0: the heuristic's choice;
// see describe_candidate) of the forward kernel for one dtype and head dim
// on `stream`. The mask (causal or sliding window, from window_left/right)
// and the softcap come from `params`. Returns the launch error (cudaSuccess when the kernel was
// queued; cudaErrorInvalidValue for a candidate index out of range).
template <DType kDType, int kHeadDim>
cudaError_t run_fwd(const detail::FwdParams& params, int candidate, cudaStream_t stream);

// Number of compiled configurations for `head_dim` (0 if none).
int num_candidates(int64_t head_dim);
// Describes configuration `index` for `head_dim`: backend, tile, warps,
// stages and name (source left as is). False if there is no such candidate.
bool describe_candidate(int64_t head_dim, int index, KernelChoice* choice);
// Dynamic shared memory configuration `index` needs per block (0 if none).
int candidate_smem_bytes(int64_t head_dim, int index);
// Whether configuration `index` is only for devices where earlier ones do not fit.
bool candidate_is_fallback(int64_t head_dim, int index);

}  // namespace flash::sm80
