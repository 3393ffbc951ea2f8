// Host-side entry points of the sm80 forward kernels: plain C++ declarations,
// defined by one .cu file per (dtype, head_dim) in instantiations/.
#pragma once

#include <cuda_runtime_api.h>

#include "../params.h"
#include "flash/flash.hpp"

namespace flash::sm80 {

// Launches the forward kernel for one dtype and head dim on `stream`.
// Returns the launch error (cudaSuccess when the kernel was queued).
template <DType kDType, int kHeadDim>
cudaError_t run_fwd(const detail::FwdParams& params, bool causal, cudaStream_t stream);

}  // namespace flash::sm80
