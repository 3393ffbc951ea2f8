// Host side of a kernel launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
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

// The grid of a split-KV kernel over packed query rows: x = ceil(rows /
// block_m) row blocks times `splits`, y = heads_kv, z = batch. False when x
// passes 2^31 - 1 (the caller's y and z are within 65535).
inline bool split_rows_grid(int64_t rows, int64_t block_m, int64_t splits, int64_t heads_kv, int64_t batch,
                            dim3* grid) {
  const int64_t x = (rows + block_m - 1) / block_m * splits;
  if (x > INT32_MAX) return false;
  *grid = dim3(static_cast<unsigned>(x), static_cast<unsigned>(heads_kv), static_cast<unsigned>(batch));
  return true;
}

}  // namespace flash
