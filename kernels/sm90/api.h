// Host-side entry points of the sm90 forward kernels: plain C++
// declarations, defined by one .cu file per (dtype, head_dim) in
// instantiations/, compiled for sm_90a only.
#pragma once

#include <cuda_runtime_api.h>

#include "../params.h"
#include "flash/flash.hpp"

namespace flash::sm90 {

// Launches the Hopper forward kernel for one dtype and head dim. Returns
// cudaErrorNotSupported, having launched nothing, when the tensors cannot be
// described to TMA (the caller then falls back to the sm80 kernel), else the
// launch error.
template <DType kDType, int kHeadDim>
cudaError_t run_fwd(const detail::FwdParams& params, bool causal, cudaStream_t stream);

}  // namespace flash::sm90
