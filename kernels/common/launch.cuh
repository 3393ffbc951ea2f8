// Host side of a kernel launch.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace flash {

// Launches `kernel` through cudaLaunchKernelEx, which returns this launch's
// own error. A <<<>>> launch followed by cudaGetLastError() would also
// return, and clear, an error an earlier CUDA call left on the thread, and
// report it as this launch's.
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
                          Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace flash
