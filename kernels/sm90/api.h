// Host-side entry points of the sm90 forward kernels: plain C++
// declarations, defined by one .cu file per (dtype, head_dim) in
// instantiations/, compiled for sm_90a only.
#pragma once

#include <cuda_runtime_api.h>

#include "../params.h"
#include "flash/flash.hpp"

namespace flash::sm90 {

// Launches compiled configuration `candidate` (0: the heuristic's choice;
// see describe_candidate) of the Hopper forward kernel for one dtype and
// head dim. Returns cudaErrorNotSupported, having launched nothing, when the
// tensors cannot be described to TMA (the caller then falls back to the sm80
// kernel), cudaErrorInvalidValue for a candidate out of range, else the
// launch error.
// Which mask variant of the kernel a call runs; all but kTail use the tiles
// chosen for causal calls.
enum class Mask {
  kTail,    // no window: only the ragged tail
  kCausal,  // a right edge only: causal (window (-1, 0)) or window_right >= 0 alone
  kWindow,  // a left edge (window_left >= 0), with or without a right one
  kSoftcap, // a logit softcap, with any window or none: every mask edge and the cap compiled in
};
template <DType kDType, int kHeadDim>
cudaError_t run_fwd(const detail::FwdParams& params, Mask mask, int candidate, cudaStream_t stream);

// Number of compiled configurations for (head_dim, masked) (0 if none).
int num_candidates(int64_t head_dim, bool masked);
// Describes configuration `index` (source left as is). False if none.
bool describe_candidate(int64_t head_dim, bool masked, int index, KernelChoice* choice);

}  // namespace flash::sm90
